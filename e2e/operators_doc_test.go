package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
)

// docs/operators.md, as TestOperatorsRecipes reads it: the `temporal`
// lines of its shell blocks, run through the SDK as Temporal's CLI would
// run them, its `bin/subagents` lines, run with the command, and its JSON
// examples of answers. The page is the test's
// script: a recipe the page changes is the recipe the test runs.

// opsDocPath is the page, from the e2e folder.
const opsDocPath = "../docs/operators.md"

// opsDoc is the page's shell lines and JSON answers.
type opsDoc struct {
	// exports are the `export NAME=VALUE` lines, as written.
	exports []string
	// commands are the `temporal ...` and `bin/subagents ...` lines, as
	// written, in page order.
	commands []string
	// answers are the JSON blocks after a "<!-- answer: TYPE -->" line,
	// by TYPE.
	answers map[string]string
	// ran marks the commands a test has run.
	ran map[string]bool
	// tables are the page's table rows, as cells.
	tables [][]string
}

func readOpsDoc(t *testing.T) *opsDoc {
	t.Helper()
	b, err := os.ReadFile(opsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	d := &opsDoc{answers: map[string]string{}, ran: map[string]bool{}}
	var fence, answer string
	var block strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence = strings.TrimPrefix(line, "```")
			block.Reset()
		case fence != "" && line == "```":
			if fence == "json" && answer != "" {
				d.answers[answer] = block.String()
			}
			fence, answer = "", ""
		case fence == "sh":
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "export "):
				d.exports = append(d.exports, strings.TrimPrefix(line, "export "))
			case strings.HasPrefix(line, "temporal "), strings.HasPrefix(line, opsSubagents+" "):
				d.commands = append(d.commands, line)
			case line != "" && !strings.HasPrefix(line, "#"):
				t.Fatalf("%s: a shell line the test does not know how to run: %q", opsDocPath, line)
			}
		case fence != "":
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "<!-- answer: "):
			answer = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- answer: "), " -->")
		case strings.HasPrefix(line, "| "):
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "| "), " | ") {
				cells = append(cells, strings.TrimSpace(c))
			}
			d.tables = append(d.tables, cells)
		}
	}
	if len(d.commands) == 0 || len(d.exports) == 0 {
		t.Fatalf("%s: no temporal command or no export line", opsDocPath)
	}
	return d
}

// command is the page's one `temporal` line that contains every part.
func (d *opsDoc) command(t *testing.T, parts ...string) string {
	t.Helper()
	var found []string
	for _, c := range d.commands {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(c, p)
		}
		if ok {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d temporal lines contain %q, want one: %q", opsDocPath, len(found), parts, found)
	}
	return found[0]
}

// notRun is the page's commands no test step ran.
func (d *opsDoc) notRun() []string {
	var out []string
	for _, c := range d.commands {
		if !d.ran[c] {
			out = append(out, c)
		}
	}
	return out
}

// opsSubagents is how the page calls the project's own command.
const opsSubagents = "bin/subagents"

// opsDateNow is the page's one command substitution besides $(cat FILE):
// the time now, in UTC, as a visibility query compares a datetime with.
const opsDateNow = "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

// opsShellWords splits a line as sh does for the forms the page uses: words
// apart by spaces, '...' literal, "..." with $NAME and \" in it, $NAME,
// $(cat FILE) and opsDateNow expanded from vars (FILE's ~ being
// vars["HOME"]) and the clock. An unknown variable fails: the page uses
// none the test does not give.
func opsShellWords(line string, vars map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	expand := func(s string, i int) (int, error) {
		// s[i] == '$'
		if strings.HasPrefix(s[i:], opsDateNow) {
			w.WriteString(time.Now().UTC().Format("2006-01-02T15:04:05Z"))
			return i + len(opsDateNow), nil
		}
		if strings.HasPrefix(s[i:], "$(cat ") {
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return 0, fmt.Errorf("unclosed $( in %q", line)
			}
			path := strings.TrimSpace(s[i+len("$(cat ") : i+end])
			if strings.HasPrefix(path, "~/") {
				path = vars["HOME"] + path[1:]
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return 0, err
			}
			w.WriteString(strings.TrimRight(string(b), "\n"))
			return i + end + 1, nil
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		v, ok := vars[s[i+1:j]]
		if !ok {
			return 0, fmt.Errorf("variable $%s of %q is not set", s[i+1:j], line)
		}
		w.WriteString(v)
		return j, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", line)
			}
			w.WriteString(line[i+1 : i+1+end])
			inWord, i = true, i+end+2
		case c == '"':
			inWord = true
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch {
				case line[i] == '\\' && i+1 < len(line):
					i++
					w.WriteByte(line[i])
				case line[i] == '$':
					j, err := expand(line, i)
					if err != nil {
						return nil, err
					}
					i = j - 1
				default:
					w.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unclosed \" in %q", line)
			}
			i++
		case c == '$':
			j, err := expand(line, i)
			if err != nil {
				return nil, err
			}
			inWord, i = true, j
		default:
			w.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// dialAsThePageSays connects with the settings the page's export lines
// give, read the way Temporal's CLI and SDKs read them (envconfig), with
// the service's own address in place of the default one.
func (d *opsDoc) dialAsThePageSays(t *testing.T, vars map[string]string, address string) sdkclient.Client {
	t.Helper()
	env := map[string]string{}
	for _, line := range d.exports {
		words, err := opsShellWords(line, vars)
		if err != nil || len(words) != 1 {
			t.Fatalf("export %s: %v %q", line, err, words)
		}
		name, value, _ := strings.Cut(words[0], "=")
		if name == "TEMPORAL_ADDRESS" {
			if value != "127.0.0.1:7233" {
				t.Fatalf("the page's address is %q, not the local service's default", value)
			}
			value = address
		}
		env[name] = value
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		DisableFile: true, EnvLookup: opsEnv(env),
	})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = sdklog.NewStructuredLogger(testLogger())
	c, err := sdkclient.Dial(opts)
	if err != nil {
		t.Fatalf("dial with the page's settings %v: %v", env, err)
	}
	t.Cleanup(c.Close)
	return c
}

// opsEnv is an environment for envconfig.
type opsEnv map[string]string

func (m opsEnv) Environ() []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (m opsEnv) LookupEnv(k string) (string, bool) { v, ok := m[k]; return v, ok }

// opsResult is what a `temporal` line answered: the runs a list found
// (ids: their workflow IDs, one per run), the events a show read, a
// description, the failure a closed run ended with (as describe and show
// print it), or the JSON a query or an update returned.
type opsResult struct {
	ids      []string
	runs     []*workflowpb.WorkflowExecutionInfo
	events   []enumspb.EventType
	describe *workflowservice.DescribeWorkflowExecutionResponse
	failure  *failurepb.Failure
	answer   json.RawMessage
}

// run runs one of the page's `temporal` lines with vars, as Temporal's
// CLI does it, through c. Flags the test does not know fail it: the page
// uses only these.
func (d *opsDoc) run(t *testing.T, c sdkclient.Client, line string, vars map[string]string) opsResult {
	t.Helper()
	d.ran[line] = true
	words, err := opsShellWords(line, vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) < 3 || words[0] != "temporal" || words[1] != "workflow" {
		t.Fatalf("not a temporal workflow command: %q", line)
	}
	verb, rest := words[2], words[3:]
	if verb == "update" {
		if len(rest) == 0 || rest[0] != "execute" {
			t.Fatalf("%q: only update execute is known", line)
		}
		verb, rest = "update execute", rest[1:]
	}
	flags := map[string]string{}
	for i := 0; i < len(rest); i += 2 {
		if i+1 >= len(rest) || !strings.HasPrefix(rest[i], "--") {
			t.Fatalf("%q: flags come as --name value pairs", line)
		}
		flags[strings.TrimPrefix(rest[i], "--")] = rest[i+1]
	}
	known := map[string][]string{
		"list": {"query"}, "describe": {"workflow-id"}, "show": {"workflow-id", "output"},
		"query": {"workflow-id", "name"}, "signal": {"workflow-id", "name", "input"},
		"update execute": {"workflow-id", "name", "input"}, "cancel": {"workflow-id"}, "terminate": {"workflow-id", "reason"},
	}
	for f := range flags {
		if !slices.Contains(known[verb], f) {
			t.Fatalf("%q: the test does not know --%s of %s", line, f, verb)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	id := flags["workflow-id"]
	// The page's JSON goes as it stands, as the CLI sends --input: one
	// json/plain payload.
	var input []any
	if in, ok := flags["input"]; ok {
		input = []any{json.RawMessage(in)}
	}
	var r opsResult
	switch verb {
	case "list":
		var next []byte
		for {
			resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: flags["query"], NextPageToken: next})
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			for _, ex := range resp.GetExecutions() {
				r.ids = append(r.ids, ex.GetExecution().GetWorkflowId())
				r.runs = append(r.runs, ex)
			}
			if next = resp.GetNextPageToken(); len(next) == 0 {
				break
			}
		}
	case "describe":
		if r.describe, err = c.DescribeWorkflowExecution(ctx, id, ""); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		// Of a closed run, the CLI prints how it ended: it reads the
		// run's close event.
		if info := r.describe.GetWorkflowExecutionInfo(); info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			it := c.GetWorkflowHistory(ctx, id, info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				r.failure = ev.GetWorkflowExecutionFailedEventAttributes().GetFailure()
			}
		}
	case "show":
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			r.events = append(r.events, ev.GetEventType())
			if f := ev.GetWorkflowExecutionFailedEventAttributes().GetFailure(); f != nil {
				r.failure = f
			}
		}
	case "query":
		v, err := c.QueryWorkflow(ctx, id, "", flags["name"])
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if err := v.Get(&r.answer); err != nil {
			t.Fatal(err)
		}
	case "signal":
		var arg any
		if len(input) > 0 {
			arg = input[0]
		}
		if err := c.SignalWorkflow(ctx, id, "", flags["name"], arg); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case "update execute":
		h, err := c.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: flags["name"], Args: input,
			WaitForStage: sdkclient.WorkflowUpdateStageCompleted})
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if err := h.Get(ctx, &r.answer); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case "cancel":
		if err := c.CancelWorkflow(ctx, id, ""); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case "terminate":
		if err := c.TerminateWorkflow(ctx, id, "", flags["reason"]); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	default:
		t.Fatalf("%q: the test does not know temporal workflow %s", line, verb)
	}
	return r
}

// runSubagents runs one of the page's `bin/subagents` lines with vars, as
// the test's command with its connection flags, and returns its exit code
// and what it printed.
func (d *opsDoc) runSubagents(t *testing.T, c *cli, line string, vars map[string]string) (int, string) {
	t.Helper()
	d.ran[line] = true
	words, err := opsShellWords(line, vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) < 2 || words[0] != opsSubagents {
		t.Fatalf("not a %s command: %q", opsSubagents, line)
	}
	code, stdout, stderr := c.run("", words[1], words[2:]...)
	return code, stdout + stderr
}

// input is the --input JSON of a page's line.
func opsInput(t *testing.T, line string) string {
	t.Helper()
	words, err := opsShellWords(line, map[string]string{"ID": "x"})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range words {
		if w == "--input" && i+1 < len(words) {
			return words[i+1]
		}
	}
	t.Fatalf("no --input in %q", line)
	return ""
}

// listUntil runs a page's list line until its answer holds every ID of
// want and none of not: visibility follows a workflow's changes a moment
// later.
func (d *opsDoc) listUntil(t *testing.T, c sdkclient.Client, line string, vars map[string]string, want, not []string) {
	t.Helper()
	var got []string
	// Visibility on the service's SQLite follows within milliseconds; the
	// bound is for a loaded machine.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = d.run(t, c, line, vars).ids
		ok := true
		for _, w := range want {
			ok = ok && slices.Contains(got, w)
		}
		for _, n := range not {
			ok = ok && !slices.Contains(got, n)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s\nfound %q; want %q among them and none of %q", line, got, want, not)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// opsCheckFields fails t for each key of the JSON example that is no JSON
// field of typ (at any depth): the page names only fields the payload
// types have.
func opsCheckFields(t *testing.T, what, example string, typ reflect.Type) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(example), &v); err != nil {
		t.Fatalf("%s: the page's JSON: %v\n%s", what, err, example)
	}
	var walk func(path string, v any, typ reflect.Type)
	walk = func(path string, v any, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		switch v := v.(type) {
		case map[string]any:
			if typ.Kind() != reflect.Struct {
				t.Errorf("%s: %s is an object, the type has %s", what, path, typ)
				return
			}
			fields := opsJSONFields(typ)
			for k, sub := range v {
				f, ok := fields[k]
				if !ok {
					t.Errorf("%s: %s.%s is no field of %s", what, path, k, typ)
					continue
				}
				walk(path+"."+k, sub, f)
			}
		case []any:
			for _, sub := range v {
				walk(path+"[]", sub, typ)
			}
		}
	}
	walk(what, v, typ)
}

// opsJSONFields maps a struct's JSON names to their types.
func opsJSONFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// opsExecStatus is a workflow's execution status, for a test's wait.
func opsExecStatus(t *testing.T, c sdkclient.Client, id string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus()
}

// opsSearchAttr is a keyword search attribute of a description.
func opsSearchAttr(d *workflowservice.DescribeWorkflowExecutionResponse, name string) string {
	p := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[name]
	if p == nil {
		return ""
	}
	var s string
	_ = json.Unmarshal((*commonpb.Payload)(p).GetData(), &s)
	return s
}
