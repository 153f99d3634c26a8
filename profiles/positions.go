package profiles

import (
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrorLine is the line of a profile file (src, its whole content) that
// err, what Parse said of it, is about; 0 when no line is known (a file
// too large). `subagents doctor` names it beside the file, so that an
// editor opens the profile where the mistake is.
func ErrorLine(src []byte, err error) int {
	if err == nil {
		return 0
	}
	msg := err.Error()
	if strings.Contains(msg, "never ends") || strings.Contains(msg, "name is required") {
		return 1
	}
	if m := fileLineRule.FindStringSubmatch(msg); m != nil {
		// Said as the file's line already (unknownFields).
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	head, _, splitErr := splitFrontmatter(src)
	if splitErr != nil || head == nil {
		return 0
	}
	// The frontmatter starts on the file's second line, after "---".
	const offset = 1
	if m := yamlLineRule.FindStringSubmatch(firstYAMLLine(msg)); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n + offset
		}
	}
	var doc yaml.Node
	if yaml.Unmarshal(head, &doc) != nil {
		return 0
	}
	for _, k := range errorKeys {
		if !strings.Contains(msg, k.says) {
			continue
		}
		for _, key := range k.keys {
			if line := topKeyLine(&doc, key); line > 0 {
				return line + offset
			}
		}
	}
	return 0
}

// fileLineRule finds Parse's own "frontmatter (line N): ", N the file's
// line.
var fileLineRule = regexp.MustCompile(`frontmatter \(line (\d+)\): `)

// yamlLineAnywhere finds yaml.v3's "line N:" wherever it stands in a
// message ("frontmatter: yaml: line 3: ...", "yaml: unmarshal errors:\n
// line 4: field x not found").
var yamlLineAnywhere = regexp.MustCompile(`line (\d+): `)

// firstYAMLLine is the part of a frontmatter error from its first "line
// N: " on, or "" when it names none (yamlLineRule then finds nothing).
func firstYAMLLine(msg string) string {
	if !strings.Contains(msg, "frontmatter") && !strings.Contains(msg, "want a list") {
		return ""
	}
	if loc := yamlLineAnywhere.FindStringIndex(msg); loc != nil {
		return msg[loc[0]:]
	}
	return ""
}

// errorKeys are the frontmatter keys a Parse error is about, by what it
// says, the more particular first; the first key the file has is the line.
var errorKeys = []struct {
	says string
	keys []string
}{
	{"fallbackModels:", []string{"fallbackModels"}},
	{"(whitelist) and denied_tools", []string{"denied_tools"}},
	{"tools and approved_tools", []string{"approved_tools", "allowed_tools"}},
	{`"tools" and "excludeTools"`, []string{"excludeTools", "denied_tools"}},
	{`"noSkills"`, []string{"noSkills"}},
	{"thinkingLevel", []string{"thinkingLevel", "model"}},
	{"model \"", []string{"model"}},
	{"name \"", []string{"name"}},
	{"maxDepth", []string{"maxDepth"}},
	{"maxFinalizeRetries", []string{"maxFinalizeRetries"}},
	{"timeout must", []string{"timeout"}},
	{"extraArg", []string{"extraArgs"}},
}

// topKeyLine is the line of key in the document's top mapping, or 0.
func topKeyLine(doc *yaml.Node, key string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return 0
}

// PlanStepLines are the lines of a plan document's task steps (src, a
// plan file's whole content, YAML or JSON), in api.TaskSteps' order: the
// line of each step's agent, or of its first key when it names none; 0
// where the document does not say. `subagents doctor` names them beside
// the file, for a step whose agent a run would refuse.
func PlanStepLines(src []byte) []int {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil {
		return nil
	}
	var lines []int
	var walk func(seq *yaml.Node)
	walk = func(seq *yaml.Node) {
		if seq == nil || seq.Kind != yaml.SequenceNode {
			return
		}
		for _, step := range seq.Content {
			if step.Kind != yaml.MappingNode {
				continue
			}
			// A task step has a task, an agent or a continue (api.Step.IsTask).
			task := false
			line := step.Line
			for _, key := range []string{"task", "agent", "continue"} {
				if k, v := mappingEntry(step, key); v != nil && v.Kind == yaml.ScalarNode && v.Value != "" {
					task = true
					if key == "agent" {
						line = k.Line
					}
				}
			}
			if task {
				lines = append(lines, line)
				continue
			}
			_, steps := mappingEntry(step, "steps")
			walk(steps)
			_, parallel := mappingEntry(step, "parallel")
			walk(parallel)
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind == yaml.MappingNode {
		_, steps := mappingEntry(root, "steps")
		walk(steps)
	}
	return lines
}

// mappingEntry is the key and value of key in the mapping m, or nils.
func mappingEntry(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}
