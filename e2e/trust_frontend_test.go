package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/worker/devserver"
)

// TestFrontendRefusesCallersWithoutTheKey is the attack of issue [local
// trust] by another local account, simulated by a caller that does not hold
// the service's API key (no key, or a key of its own): every local account
// reaches 127.0.0.1, so the key is the only difference between the user and
// another account. Such a caller cannot start a Session (whose child would
// run code as the user), list, describe or read a history; the server's
// internal services refuse a plain connection and a TLS one without this
// process's certificate; this project's own command, given the data dir,
// works without the user doing anything.
func TestFrontendRefusesCallersWithoutTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dev, c, port := e.devCLI()
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// The key: made at first start, the owner's only, in a 0700 data dir.
	info, err := os.Stat(connection.KeyPath(e.dataDir))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, info)
	}
	if dir, err := os.Stat(e.dataDir); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v, want 0700", err)
	}
	if !strings.Contains(dev.stdout.String(), connection.KeyPath(e.dataDir)) {
		t.Fatalf("the banner does not say where the key is:\n%s", dev.stdout)
	}

	for _, tc := range []struct {
		name string
		opts sdkclient.Options
	}{
		{"no key", sdkclient.Options{HostPort: addr, Logger: quietLogger{}}},
		{"a key of its own", sdkclient.Options{HostPort: addr, Logger: quietLogger{},
			Credentials:       sdkclient.NewAPIKeyStaticCredentials("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
			ConnectionOptions: sdkclient.ConnectionOptions{TLSDisabled: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Dialing checks the server's health, which stays open.
			other, err := sdkclient.DialContext(e.ctx(), tc.opts)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer other.Close()
			in := e.sessionInput("[[script:never]] Run code as the service's user.")
			_, err = other.ExecuteWorkflow(e.ctx(), sdkclient.StartWorkflowOptions{ID: in.SessionID, TaskQueue: e.taskQueue}, api.SessionWorkflowName, in)
			wantDenied(t, "start a Session", err)
			_, err = other.ListWorkflow(e.ctx(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
			wantDenied(t, "list workflows", err)
			_, err = other.DescribeWorkflowExecution(e.ctx(), in.SessionID, "")
			wantDenied(t, "describe a workflow", err)
			if n := len(e.model.RequestsFor("never")); n != 0 {
				t.Fatalf("the model was called %d times", n)
			}
		})
	}

	// The server's own services: history, matching, the internal frontend
	// and the system worker listen on loopback ports of their own.
	pid := dev.cmd.Process.Pid
	listening, err := listeningPorts(pid)
	if err != nil {
		t.Fatal(err)
	}
	internal := 0
	for _, p := range listening {
		if p == port {
			continue
		}
		target := fmt.Sprintf("127.0.0.1:%d", p)
		if plainGRPCHealthy(target) {
			t.Fatalf("port %d of the service answers plain gRPC without a certificate", p)
		}
		if handshake(target) == nil {
			// A TLS server that takes a client without a certificate.
			t.Fatalf("port %d of the service accepts TLS without a client certificate", p)
		}
		internal++
	}
	if internal < 3 {
		t.Fatalf("found %d internal ports of %d listening (%v): history, matching and the internal frontend at least", internal, pid, listening)
	}

	// The project's own command needs nothing from the user: it finds the
	// key in the data dir (cliEnv names it, as the extension does).
	e.model.Script("trusted", finalizeStep("done with the key"))
	out, raw := c.json(0, "", "run", "--agent", "scout", "--cwd", e.workDir, "[[script:trusted]] Look around.")
	if len(out.Items) != 1 || out.Items[0].Output != "done with the key" {
		t.Fatalf("run with the key: %s", raw)
	}
	// Dialing the frontend itself (no socket), the command uses the key.
	code, stdout, stderr := runSubagents(t, append(e.cliEnv(), "SUBAGENTS_SOCKET=0"), "list", "--address", addr, "--task-queue", e.taskQueue)
	if code != 0 || !strings.Contains(stdout, out.Items[0].TaskID) {
		t.Fatalf("list dialing with the key: exit %d, %s %s", code, stdout, stderr)
	}
	// A command pointed at a data dir with no key (another account's view)
	// is refused with the coded error and its reason.
	code, _, stderr = runSubagents(t, []string{"SUBAGENTS_DATA_DIR=" + t.TempDir(), "SUBAGENTS_SOCKET=0"}, "list", "--address", addr)
	if code == 0 || !strings.Contains(stderr, "API key") {
		t.Fatalf("list without the key: exit %d, %s", code, stderr)
	}
}

// wantDenied fails unless err is the frontend's permission refusal, naming
// what to pass.
func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	var denied *serviceerror.PermissionDenied
	if !errors.As(err, &denied) {
		t.Fatalf("%s without the key: %v, want PermissionDenied", what, err)
	}
	if !strings.Contains(err.Error(), "API key") {
		t.Fatalf("%s: %v does not say what to pass", what, err)
	}
}

// plainGRPCHealthy is whether target answers a gRPC health check over a
// plain connection.
func plainGRPCHealthy(target string) bool {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil
}

// handshake completes a TLS handshake with target, presenting no
// certificate, and reads from it: a server that wants a client certificate
// fails one or the other.
func handshake(target string) error {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", target, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	// TLS 1.3 reports a refused client certificate at the first read.
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// TestUIOnlyForThisMachinesUser: the UI answers loopback names only (a web
// page that rebinds its own name to 127.0.0.1 gets nothing, not even the
// UI's CSRF cookie), asks for the login the key gives, keeps that login in
// an HttpOnly cookie, and the UI server behind it cannot be used to reach
// the frontend without passing through that login; --ui-ip off loopback is
// refused.
func TestUIOnlyForThisMachinesUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uiPort := freePort()
	dev, _, port := e.devCLI("--ui-port", strconv.Itoa(uiPort))
	base := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// DNS rebinding: the page's own name, resolved to 127.0.0.1.
	req, _ := http.NewRequest(http.MethodGet, base+"/namespaces/default/workflows", nil)
	req.Host = fmt.Sprintf("rebind.example:%d", uiPort)
	resp := do(t, noRedirect, req)
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("Host rebind.example: %d, cookies %v; want 403 and none", resp.StatusCode, resp.Cookies())
	}
	start := fmt.Sprintf(`{"workflowId":"rebound","workflowType":{"name":%q},"taskQueue":{"name":%q}}`, api.SessionWorkflowName, e.taskQueue)
	req, _ = http.NewRequest(http.MethodPost, base+"/api/v1/namespaces/default/workflows/rebound", strings.NewReader(start))
	req.Host = fmt.Sprintf("rebind.example:%d", uiPort)
	req.Header.Set("Content-Type", "text/plain")
	if resp := do(t, noRedirect, req); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a rebound POST: %d, want 403", resp.StatusCode)
	}

	// No login: the page says how to get one; nothing of the UI's.
	resp = do(t, noRedirect, mustRequest(t, http.MethodGet, base+"/namespaces/default/workflows"))
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "subagents ui") {
		t.Fatalf("no login: %d %q", resp.StatusCode, body)
	}
	// A wrong token logs nobody in.
	resp = do(t, noRedirect, mustRequest(t, http.MethodGet, base+connection.UILoginPath+"?token=00"))
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	// The link `subagents ui` prints logs in: an HttpOnly, SameSite=Strict
	// cookie, and a redirect to the page it names, of this UI only.
	code, link, stderr := runSubagents(t, e.cliEnv(), "ui", "--address", fmt.Sprintf("127.0.0.1:%d", port), "--ui-url", base)
	if code != 0 {
		t.Fatalf("subagents ui: %d %s", code, stderr)
	}
	resp = do(t, noRedirect, mustRequest(t, http.MethodGet, strings.TrimSpace(link)))
	login := findCookie(resp, devserver.UICookie)
	if resp.StatusCode != http.StatusSeeOther || login == nil || !login.HttpOnly || login.SameSite != http.SameSiteStrictMode ||
		resp.Header.Get("Location") != "/namespaces/default/workflows" {
		t.Fatalf("login: %d, cookie %+v, location %q", resp.StatusCode, login, resp.Header.Get("Location"))
	}
	u, _ := url.Parse(strings.TrimSpace(link))
	q := u.Query()
	q.Set("next", "//evil.example/")
	resp = do(t, noRedirect, mustRequest(t, http.MethodGet, base+connection.UILoginPath+"?"+q.Encode()))
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Fatalf("login with next=//evil.example/ sends the browser to %q", loc)
	}

	// Logged in, the UI reads and writes through the frontend: a start
	// from the UI's API, with its CSRF token, as its page sends it.
	page := mustRequest(t, http.MethodGet, base+"/namespaces/default/workflows")
	page.AddCookie(login)
	resp = do(t, noRedirect, page)
	csrf := findCookie(resp, "_csrf")
	if resp.StatusCode != http.StatusOK || csrf == nil {
		t.Fatalf("the UI page logged in: %d, csrf %v", resp.StatusCode, csrf)
	}
	id := "ui-started-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	post := func(cookies ...*http.Cookie) *http.Response {
		body := fmt.Sprintf(`{"workflowId":%q,"workflowType":{"name":"NoSuchType"},"taskQueue":{"name":"ui-nobody-polls"}}`, id)
		req := mustRequest(t, http.MethodPost, base+"/api/v1/namespaces/default/workflows/"+id)
		req.Body = io.NopCloser(strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Csrf-Token", csrf.Value)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		return do(t, noRedirect, req)
	}
	if resp := post(csrf); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a UI write without the login: %d, want 401", resp.StatusCode)
	}
	if resp := post(csrf, login); resp.StatusCode != http.StatusOK {
		t.Fatalf("a UI write logged in: %d %s", resp.StatusCode, readBody(t, resp))
	}
	tc := e.dialAddress(fmt.Sprintf("127.0.0.1:%d", port))
	defer tc.Close()
	if _, err := tc.DescribeWorkflowExecution(e.ctx(), id, ""); err != nil {
		t.Fatalf("the workflow the UI started: %v", err)
	}
	_ = tc.TerminateWorkflow(e.ctx(), id, "", "test done")

	// The UI server behind the front, found among the service's ports:
	// its pages, but no call to the frontend without the front's login.
	ports, err := listeningPorts(dev.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	inner := 0
	for _, p := range ports {
		if p == uiPort || p == port {
			continue
		}
		r, err := noRedirect.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", p))
		if err != nil {
			continue
		}
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			inner = p
		}
	}
	if inner == 0 {
		t.Fatalf("no UI server behind the front among %v", ports)
	}
	req = mustRequest(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces/default/workflows", inner))
	req.Header.Set("X-Subagents-Ui-Front", "forged")
	req.Header.Set("Authorization", "Bearer forged")
	if resp := do(t, noRedirect, req); resp.StatusCode == http.StatusOK {
		t.Fatalf("the UI server behind the front listed workflows for a caller without the login: %s", readBody(t, resp))
	}

	// Off loopback, the UI does not start.
	code, _, stderr = runSubagents(t, e.cliEnv(), "dev", "--ephemeral", "--port", strconv.Itoa(freePort()), "--data-dir", filepath.Join(t.TempDir(), "d"), "--ui-ip", "0.0.0.0")
	if code != 2 || !strings.Contains(stderr, "--ui-ip 0.0.0.0") || !strings.Contains(stderr, "loopback") {
		t.Fatalf("--ui-ip 0.0.0.0: exit %d, %s", code, stderr)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func do(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func findCookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestKeyNotSentToAnotherUsersListener: with the local service stopped,
// another account (uid 65534, by setpriv: the tests run as root) listens on
// its port to collect the key a command presents. The command refuses to
// dial it, saying whose it is.
func TestKeyNotSentToAnotherUsersListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := connection.EnsureKey(e.dataDir); err != nil {
		t.Fatal(err)
	}
	port := freePort()
	squatter := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "perl", "-MIO::Socket::INET", "-e",
		fmt.Sprintf(`$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => %d, Listen => 5, ReuseAddr => 1) or die "listen: $!"; $| = 1; print "ready\n"; while ($c = $s->accept) { sleep 60 }`, port))
	out := &syncBuffer{}
	squatter.Stdout, squatter.Stderr = out, out
	if err := squatter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = squatter.Process.Kill(); _ = squatter.Wait() })
	deadline := time.Now().Add(testTimeout)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("the other account's listener did not start: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, _, stderr := runSubagents(t, append(e.cliEnv(), "SUBAGENTS_SOCKET=0"), "list", "--address", fmt.Sprintf("127.0.0.1:%d", port))
	if code != 2 || !strings.Contains(stderr, "belongs to user 65534") || !strings.Contains(stderr, "not sending it this user's API key") {
		t.Fatalf("a command dialing another account's listener: exit %d, %s", code, stderr)
	}
}
