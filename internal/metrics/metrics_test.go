package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/durable-pi/subagents/api"
)

func TestChildRunSeries(t *testing.T) {
	m := New()
	defer func() { _ = m.Close() }()
	runs := []struct {
		agent, outcome string
		usage          api.Usage
	}{
		{"scout", "completed", api.Usage{Input: 100, Output: 20, Cost: 0.5}},
		{"scout", "subagent_timeout", api.Usage{Input: 50, CacheRead: 7, Cost: 0.25}},
		{"oracle", "completed", api.Usage{Output: 3}},
	}
	for _, r := range runs {
		m.ChildRun(r.agent, r.outcome, 2*time.Second, r.usage)
	}
	for _, tc := range []struct {
		got  float64
		want float64
	}{
		{testutil.ToFloat64(m.tokens.WithLabelValues("scout", "input")), 150},
		{testutil.ToFloat64(m.tokens.WithLabelValues("scout", "cache_read")), 7},
		{testutil.ToFloat64(m.tokens.WithLabelValues("oracle", "output")), 3},
		{testutil.ToFloat64(m.cost.WithLabelValues("scout")), 0.75},
	} {
		if tc.got != tc.want {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.childSeconds); n != 3 {
		t.Errorf("%d child run series, want 3 (agent × outcome)", n)
	}
}

func TestSDKHandlerAndEndpoint(t *testing.T) {
	m := New()
	h := m.Handler.WithTags(map[string]string{"agent": "scout"})
	h.Counter("subagents_tasks_started").Inc(2)
	h.Gauge("some_gauge").Update(1.5)
	h.Timer("some_latency").Record(30 * time.Millisecond)
	// Close flushes tally's last report into the registry.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.Serve(ctx, "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// Counters end in _total; the SDK's timers have buckets up to an hour.
	for _, want := range []string{`subagents_tasks_started_total{agent="scout"} 2`, `some_gauge{agent="scout"} 1.5`,
		`some_latency_bucket{agent="scout",le="3600"}`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), "subagents_tasks_started{") {
		t.Error("a counter without _total")
	}
	if _, err := m.Serve(ctx, addr, slog.Default()); err == nil {
		t.Error("a second server on a used address did not fail")
	}
}

// TestAgentLabelIsBounded: whatever names callers send, the agent label
// takes at most maxAgents values; the rest count as "other".
func TestAgentLabelIsBounded(t *testing.T) {
	m := New()
	defer func() { _ = m.Close() }()
	for i := range maxAgents + 50 {
		m.ChildRun(fmt.Sprintf("agent-%d", i), "completed", time.Second, api.Usage{Output: 1})
		m.Handler.WithTags(map[string]string{"agent": fmt.Sprintf("agent-%d", i)}).Counter("subagents_tasks_started").Inc(1)
	}
	if n := testutil.CollectAndCount(m.cost); n != maxAgents+1 {
		t.Fatalf("%d cost series, want %d (and other)", n, maxAgents+1)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("other", "output")); got != 50 {
		t.Fatalf("other counted %v outputs, want 50", got)
	}
	if n := testutil.CollectAndCount(m.childSeconds); n != maxAgents+1 {
		t.Fatalf("%d run series", n)
	}
}
