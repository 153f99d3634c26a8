package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/internal/syncbuf"
)

// keptChaosSections returns the reliability figures that `make chaos`
// wrote into the report (between <!-- chaos:NAME --> markers), so that a
// new bench run keeps them.
func keptChaosSections(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	var out []string
	for {
		i := strings.Index(s, "<!-- chaos:")
		if i < 0 {
			break
		}
		name := s[i+len("<!-- chaos:"):]
		name = name[:max(strings.Index(name, " -->"), 0)]
		end := "<!-- /chaos:" + name + " -->"
		j := strings.Index(s, end)
		if j < i {
			break
		}
		out = append(out, s[i:j+len(end)])
		s = s[j+len(end):]
	}
	if len(out) == 0 {
		return ""
	}
	return "\n## Reliability suite (`make chaos`)\n\n" + strings.Join(out, "\n\n") + "\n"
}

// recovery kills a worker process (SIGKILL) while its child runs and times
// how long until a new worker's attempt reaches the model, and until the
// task is done.
func (b *bench) recovery(reps int) (string, error) {
	var resumed, done []time.Duration
	c := &client.Client{Temporal: b.tc, TaskQueue: "bench-recovery", Address: b.address}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(b.bin, "worker", "--address", b.address, "--task-queue", "bench-recovery",
			"--data-dir", filepath.Join(b.dataDir, "recovery"), "--pi", b.pi.Path, "--log-level", "error")
		cmd.Env = append(os.Environ(), scriptedmodel.PiEnv(b.agentDir)...)
		return cmd, cmd.Start()
	}
	for range reps {
		w, err := start()
		if err != nil {
			return "", err
		}
		var w2 *exec.Cmd
		_, res, fin, err := b.crashRun(c,
			func() { _ = w.Process.Kill(); _ = w.Wait() },
			func() error { w2, err = start(); return err })
		if err != nil {
			return "", err
		}
		resumed, done = append(resumed, res), append(done, fin)
		_ = w2.Process.Signal(os.Interrupt)
		_ = w2.Wait()
	}
	var r strings.Builder
	r.WriteString("\n## Recovery from a killed worker\n\n")
	fmt.Fprintf(&r, "`subagents worker` as a process, SIGKILLed 1.5 s into a child run and started again at once, %d times: ", reps)
	fmt.Fprintf(&r, "the new worker's attempt reaches the model after p50 %s (max %s), target ≤ 5 s; the task is done after p50 %s (max %s) (the scripted model takes 3 s over this answer, as it did for the killed attempt). ",
		ms(pct(resumed, 0.5)), ms(pct(resumed, 1)), ms(pct(done, 0.5)), ms(pct(done, 1)))
	r.WriteString("Defaults: heartbeat every 2 s, heartbeat timeout 5 s, first retry after 200 ms, sticky workflow tasks released after 1 s.\n")
	return r.String(), nil
}

// crashRun starts the recovery task through c, lets its child run 1.5 s
// (a heartbeat or two go out, as in a real run), kills what runs it with
// kill and starts it again with restart. It times, from the kill, when
// restart returned, when the new attempt reached the model and when the
// task was done.
func (b *bench) crashRun(c *client.Client, kill func(), restart func() error) (ready, resumed, done time.Duration, err error) {
	before := len(b.model.RequestsFor("recover"))
	env, err := c.Start(b.ctx, client.StartRequest{Tasks: []api.TaskSpec{{Name: "recover", Prompt: "[[script:recover]] Say done.", Profile: "bench", Cwd: b.workDir}}, IdleTTLSeconds: -1})
	if err != nil {
		return 0, 0, 0, err
	}
	reached := func(n int) error {
		wctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		_, err := b.model.WaitForRequests(wctx, n, func(r scriptedmodel.Request) bool { return r.Script == "recover" })
		return err
	}
	if err := reached(before + 1); err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(1500 * time.Millisecond)
	kill()
	killed := time.Now()
	if err := restart(); err != nil {
		return 0, 0, 0, err
	}
	ready = time.Since(killed)
	if err := reached(before + 2); err != nil {
		return 0, 0, 0, err
	}
	resumed = time.Since(killed)
	fin, err := c.Wait(b.ctx, env.DelegationID, 2*time.Minute)
	if err != nil || !fin.Done || fin.Items[0].Output != "done" {
		return 0, 0, 0, fmt.Errorf("recovery run: %v %+v", err, fin)
	}
	return ready, resumed, time.Since(killed), nil
}

// timeline prints the events of one stub task's delegation and session with
// their offsets from the delegation's start: where its time goes.
func (b *bench) timeline() error {
	start := time.Now()
	req := client.StartRequest{IdleTTLSeconds: -1, Tasks: []api.TaskSpec{{Name: "t", Prompt: "stub", Cwd: b.workDir}}}
	env, err := b.stub.Start(b.ctx, req)
	if err != nil {
		return err
	}
	startReturned := time.Since(start)
	if _, err := b.stub.Wait(b.ctx, env.DelegationID, time.Minute); err != nil {
		return err
	}
	fmt.Printf("start returned after %s, wait after %s\n", startReturned, time.Since(start))
	for _, id := range []string{env.DelegationID, env.Items[0].TaskID} {
		it := b.tc.GetWorkflowHistory(b.ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		fmt.Println(id)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			fmt.Printf("  %7.1f ms  %s\n", float64(ev.GetEventTime().AsTime().Sub(start))/float64(time.Millisecond), ev.GetEventType())
		}
	}
	return nil
}

// devRestart kills a whole `subagents dev` (server, UI and worker in one
// process) with SIGKILL while a child runs, starts it again on the same
// database, and times how long until the task is done.
func (b *bench) devRestart(reps int) (string, error) {
	dir := filepath.Join(b.dataDir, "dev-restart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	port := freePort()
	address := fmt.Sprintf("127.0.0.1:%d", port)
	start := func() (*exec.Cmd, *syncbuf.Buffer, error) {
		cmd := exec.Command(b.bin, "dev", "--port", strconv.Itoa(port), "--headless", "--db-filename", filepath.Join(dir, "temporal.db"),
			"--data-dir", filepath.Join(dir, "data"), "--pi", b.pi.Path, "--log-level", "error")
		cmd.Env = append(os.Environ(), scriptedmodel.PiEnv(b.agentDir)...)
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), "worker polling task queue") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				return nil, nil, fmt.Errorf("subagents dev did not start:\n%s", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return cmd, out, nil
	}
	dial := func() (sdkclient.Client, error) {
		// With the service's API key, from its data dir, as its clients dial.
		return connection.Settings{Address: address, DataDir: filepath.Join(dir, "data")}.Dial(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	var ready, resumed, done []time.Duration
	for range reps {
		dev, _, err := start()
		if err != nil {
			return "", err
		}
		tc, err := dial()
		if err != nil {
			return "", err
		}
		c := &client.Client{Temporal: tc, TaskQueue: api.DefaultTaskQueue, Address: address}
		up, res, fin, err := b.crashRun(c,
			func() { tc.Close(); _ = dev.Process.Kill(); _ = dev.Wait() },
			func() error {
				if dev, _, err = start(); err != nil {
					return err
				}
				tc, err = dial()
				c.Temporal = tc
				return err
			})
		if err != nil {
			return "", err
		}
		ready, resumed, done = append(ready, up), append(resumed, res), append(done, fin)
		tc.Close()
		_ = dev.Process.Signal(syscall.SIGTERM)
		_ = dev.Wait()
	}
	var r strings.Builder
	r.WriteString("\n## Recovery from a killed `subagents dev`\n\n")
	fmt.Fprintf(&r, "The whole `subagents dev` (server, worker) SIGKILLed 1.5 s into a child run and started again at once on the same database file, %d times: ", reps)
	fmt.Fprintf(&r, "it serves again after p50 %s (max %s); the new attempt reaches the model after p50 %s (max %s), target ≤ 5 s; the task is done after p50 %s (max %s) from the kill (the scripted model takes 3 s over this answer).\n",
		ms(pct(ready, 0.5)), ms(pct(ready, 1)), ms(pct(resumed, 0.5)), ms(pct(resumed, 1)), ms(pct(done, 0.5)), ms(pct(done, 1)))
	return r.String(), nil
}
