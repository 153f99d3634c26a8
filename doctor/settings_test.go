package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSettings(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		env    map[string]string
		status Status
		has    []string
	}{
		{"none", nil, nil, OK, []string{"no settings files"}},
		{"valid", map[string]string{
			"agent/subagents.json": `{"extension": {"taskQueue": "q", "tools": {"primary": false}, "maxLinesPerWindow": 20}, "subagents": {"taskMaxConcurrency": 3}}`,
			"agent/settings.json":  `{"defaultProvider": "anthropic"}`,
		}, nil, OK, []string{"2 settings files valid"}},
		{"a JSON mistake", map[string]string{"work/.pi/subagents.json": "{\n  \"extension\": {\n    \"tools\": {,}\n  }\n}\n"}, nil, Fail,
			[]string{"work/.pi/subagents.json:3: invalid character ','"}},
		{"pi's own file", map[string]string{"agent/settings.json": "{\n\"a\": 1,\n}"}, nil, Fail, []string{"agent/settings.json:3: "}},
		{"not an object", map[string]string{"agent/subagents.json": "[1]"}, nil, Fail, []string{"subagents.json:1: the file must hold one JSON object"}},
		{"the extension's values", map[string]string{"agent/subagents.json": "{\"extension\": {\n  \"autoStart\": \"yes\",\n  \"maxLinesPerWindow\": 0,\n  \"tools\": {\"task\": \"no\"}\n}}"}, nil, Fail,
			[]string{"subagents.json:2: extension.autoStart: must be true or false", "subagents.json:3: extension.maxLinesPerWindow: must be a whole number, 1 to 1000, not 0", "subagents.json:4: extension.tools: task must be true or false"}},
		{"the service's values", map[string]string{"work/.pi/subagents.json": "{\n  \"subagents\": {\n    \"taskMaxConcurrency\": 99\n  }\n}"}, nil, Fail,
			[]string{"work/.pi/subagents.json:3: subagents.taskMaxConcurrency: taskMaxConcurrency must be 1 to 16, not 99"}},
		{"a variable", nil, map[string]string{"SUBAGENTS_TASK_MAX_CONCURRENCY": "many"}, Fail, []string{"$SUBAGENTS_TASK_MAX_CONCURRENCY: taskMaxConcurrency must be a whole number"}},
		{"an extension variable", nil, map[string]string{"SUBAGENTS_MAX_LINES_PER_WINDOW": "0"}, Fail, []string{"$SUBAGENTS_MAX_LINES_PER_WINDOW: must be a whole number, 1 to 1000"}},
		{"a project that picks the queue", map[string]string{"work/.pi/subagents.json": "{\"extension\": {\n\"taskQueue\": \"theirs\", \"bin\": \"./evil\"}}"}, nil, Warn,
			[]string{"sets bin, taskQueue, which only pi's config dir or the environment may set"}},
		{"a misspelt key", map[string]string{"agent/subagents.json": "{\"extension\": {\n\"autostart\": false}}"}, nil, Warn,
			[]string{`subagents.json:2: unknown setting "extension.autostart": did you mean "extension.autoStart"? The extension ignores it`}},
		{"a misspelt tool family", map[string]string{"agent/subagents.json": "{\"extension\": {\"tools\": {\n\"delegat\": false}}}"}, nil, Warn,
			[]string{`subagents.json:2: unknown setting "extension.tools.delegat": did you mean "extension.tools.delegate"? The extension ignores it`}},
		// The service's object: the key by name, on its line, with the
		// near one (issue 42).
		{"a misspelt service key", map[string]string{"agent/subagents.json": "{\"subagents\": {\n  \"taskMaxEvnts\": 5}}"}, nil, Fail,
			[]string{`agent/subagents.json:2: unknown setting "taskMaxEvnts": did you mean "taskMaxEvents"?`}},
		{"a misspelt key of a profile's entry", map[string]string{"work/.pi/subagents.json": "{\"subagents\": {\n  \"finder\": {\n    \"disabeld\": true}}}"}, nil, Fail,
			[]string{`work/.pi/subagents.json:3: unknown setting "finder.disabeld": did you mean "finder.disabled"?`}},
		{"a profile's model of the wrong kind", map[string]string{"agent/subagents.json": "{\"subagents\": {\n  \"finder\": {\n    \"model\": 5}}}"}, nil, Fail,
			[]string{`agent/subagents.json:3: subagents.finder.model must be a model "provider/id[:thinking]", not 5`}},
		// Both are said, in the verdict and the details.
		{"a misspelt key and a mistake", map[string]string{"agent/subagents.json": "{\"extension\": {\n\"taskQueu\": \"q\",\n\"maxLinesPerWindow\": 0}}"}, nil, Fail,
			[]string{"1 mistake in the settings: ", "subagents.json:3: extension.maxLinesPerWindow: must be a whole number", "; and ignored: ",
				`subagents.json:2: unknown setting "extension.taskQueu": did you mean "extension.taskQueue"? The extension ignores it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.files)
			if err := os.MkdirAll(filepath.Join(root, "work"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := Config{AgentDir: filepath.Join(root, "agent"), Cwd: filepath.Join(root, "work"), Getenv: func(k string) string { return tt.env[k] }}
			r := checkSettings(cfg, os.ReadFile)
			if r.Status != tt.status {
				t.Fatalf("%+v", r)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.Verdict, h) {
					t.Errorf("verdict %q lacks %q", r.Verdict, h)
				}
			}
			if r.Status != OK && r.Fix == "" {
				t.Fatal("no fix")
			}
			if strings.Contains(r.Verdict, "ignores it") {
				if ign, _ := r.Details["ignored"].([]string); len(ign) == 0 || !strings.Contains(r.Fix, "keys the extension ignores") {
					t.Fatalf("the ignored keys are not in the details or the fix: %+v", r)
				}
			}
		})
	}
}
