package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// chromium finds the browser `make test` installs (Debian's chromium), or
// $SUBAGENTS_CHROMIUM.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SUBAGENTS_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("no chromium: `make test` installs Debian's chromium (make browser), or set SUBAGENTS_CHROMIUM")
	return ""
}

// browser starts headless Chromium with the flags this machine needs (no
// background networking: its connections would be refused) and a fresh
// profile; it ends with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		// Tall enough that a session's page shows its event history.
		chromedp.WindowSize(1400, 2200),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*testTimeout)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// pageText opens url and waits until the page's visible text holds every
// one of want (the UI renders from its API after load); it returns it.
func pageText(t *testing.T, ctx context.Context, url string, want ...string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if err != nil {
			t.Fatalf("read %s: %v", url, err)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q; it shows:\n%.3000s", url, missing, text)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "test-artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// Secrets the test plants: a profile's apiKey (must never reach a history)
// and a provider key a child prints (must be masked before it does).
const (
	profileAPIKey = "sk-profile-key-9f8e7d6c5b4a39281706"
	printedKey    = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
)

// operatorColumns is the workflow list's column set docs/monitoring.md "The Temporal UI"
// describes, as the UI stores it for the default namespace.
const operatorColumns = `{"default":[{"label":"Status"},{"label":"SubagentAgent"},{"label":"SubagentStatus"},{"label":"SubagentCwd"},{"label":"Workflow ID"},{"label":"Type"},{"label":"Start"}]}`

// TestUIInARealBrowser drives headless Chromium against `subagents dev`'s
// Temporal UI after a delegation: the list shows the delegation and its
// sessions, our search attributes filter it, a session's page shows its
// RunPi runs including the corrective-feedback retry, and no payload holds
// a secret.
func TestUIInARealBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	e := newEnv(t)
	agents := filepath.Join(e.workDir, ".pi", "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	e.trustWithPi(e.workDir) // the user's own project
	profile := fmt.Sprintf("---\nname: keyed\ndescription: a profile with its own API key\nmodel: %s\napiKey: %s\n---\nYou look things up.\n", scriptedmodel.ModelRef, profileAPIKey)
	if err := os.WriteFile(filepath.Join(agents, "keyed.md"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Script("ui-retry",
		scriptedmodel.Step{Text: "The token is in config.yaml, I believe."},
		finalizeStep("config.yaml:3 holds the token "+printedKey))
	e.model.Script("ui-plain", finalizeStep("plain: nothing to report"))
	uiPort := freePort()
	_, c, port := e.devCLI("--ui-port", strconv.Itoa(uiPort))
	req := fmt.Sprintf(`{"tasks":[
		{"name":"retrying","prompt":"[[script:ui-retry]] Where is the token?","profile":"keyed","cwd":%q},
		{"name":"plain","prompt":"[[script:ui-plain]] Anything to report?","profile":"scout","cwd":%q,"model":%q}]}`,
		e.workDir, e.workDir, scriptedmodel.ModelRef)
	started, _ := c.json(0, req, "start", "--input", "-")
	done, out := c.json(0, "", "wait", "--timeout", "60s", started.DelegationID)
	retrying, plain := done.Items[0], done.Items[1]
	if retrying.Attempts != 2 || !strings.Contains(retrying.Output, "config.yaml:3") || strings.Contains(out, printedKey) {
		t.Fatalf("delegation: %s", out)
	}

	ui := fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows", uiPort)
	// The browser logs in once, with the link `subagents ui` prints.
	code, login, _ := runSubagents(t, e.cliEnv(), "ui", "--address", fmt.Sprintf("127.0.0.1:%d", port), "--ui-url", fmt.Sprintf("http://127.0.0.1:%d", uiPort))
	if code != 0 || !strings.Contains(login, "/login?") {
		t.Fatalf("subagents ui: exit %d, %q", code, login)
	}
	list := pageText(t, ctx, strings.TrimSpace(login), started.DelegationID, retrying.TaskID, plain.TaskID)
	if !strings.Contains(list, "Delegation") || !strings.Contains(list, "Session") {
		t.Fatalf("the list does not show the workflow types:\n%.3000s", list)
	}
	// The list as docs/monitoring.md "The Temporal UI" sets it up (its columns button): our
	// search attributes as columns, so each row reads as a task: its
	// agent, state and folder. The UI keeps the columns in local storage.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](fmt.Sprintf(`localStorage.setItem("namespace-workflow-table-columns", %q)`, operatorColumns))); err != nil {
		t.Fatal(err)
	}
	list = pageText(t, ctx, ui, started.DelegationID, "keyed", "scout", "SubagentCwd", e.workDir)
	screenshot(t, ctx, "ui-workflow-list.png")

	byAgent := pageText(t, ctx, ui+"?query="+url.QueryEscape(`SubagentAgent="keyed"`), retrying.TaskID)
	if strings.Contains(byAgent, plain.TaskID) || strings.Contains(byAgent, started.DelegationID) {
		t.Fatalf("SubagentAgent=\"keyed\" shows other workflows:\n%.3000s", byAgent)
	}
	// A session between turns shows how its last turn ended (the README's
	// statuses): the UI's status filter finds it with the delegation.
	pageText(t, ctx, ui+"?query="+url.QueryEscape(`SubagentStatus="completed"`), started.DelegationID, retrying.TaskID)

	tc := e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	defer tc.Close()
	desc, err := tc.DescribeWorkflowExecution(e.ctx(), retrying.TaskID, "")
	if err != nil {
		t.Fatal(err)
	}
	runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	session := pageText(t, ctx, ui+"/"+retrying.TaskID+"/"+runID+"/history", "RunPi")
	screenshot(t, ctx, "ui-session-history.png")
	if n := strings.Count(session, "RunPi"); n < 2 {
		t.Fatalf("the session page shows RunPi %d times, want the first run and its corrective-feedback retry:\n%.4000s", n, session)
	}
	// The UI draws activity summaries in sandboxed frames a page script
	// cannot read; the UI server's API, which fills them, must carry them.
	api := e.uiGet(uiPort, fmt.Sprintf("/api/v1/namespaces/default/workflows/%s/history", retrying.TaskID))
	summaries := ""
	for _, m := range payloadData.FindAllStringSubmatch(api, -1) {
		if d, err := base64.StdEncoding.DecodeString(m[1]); err == nil {
			summaries += string(d) + "\n"
		}
	}
	for _, want := range []string{"turn 1: keyed", "turn 1: corrective feedback, run 2"} {
		if !strings.Contains(summaries, want) {
			t.Fatalf("the UI's history has no RunPi summary %q", want)
		}
	}
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{profileAPIKey, printedKey} {
		if strings.Contains(html, secret) || strings.Contains(list, secret) {
			t.Fatalf("the UI shows the secret %q", secret)
		}
	}

	// Every payload of every history, decoded: no secret anywhere.
	for _, id := range []string{started.DelegationID, retrying.TaskID, plain.TaskID} {
		payloads := historyPayloads(t, tc, id)
		if len(payloads) == 0 {
			t.Fatalf("no payloads in %s's history", id)
		}
		for _, p := range payloads {
			for _, secret := range []string{profileAPIKey, printedKey} {
				if strings.Contains(p, secret) {
					t.Fatalf("%s's history holds the secret %q in %.300s", id, secret, p)
				}
			}
		}
	}
}

var payloadData = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]*)"`)

// historyPayloads returns the decoded data of every payload in a history.
func historyPayloads(t *testing.T, c sdkclient.Client, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range historyOf(t, c, id) {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range payloadData.FindAllSubmatch(b, -1) {
			d, err := base64.StdEncoding.DecodeString(string(m[1]))
			if err == nil {
				out = append(out, string(d))
			}
		}
	}
	return out
}
