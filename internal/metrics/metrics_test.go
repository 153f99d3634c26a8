package metrics

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/durable-pi/subagents/activities"
)

func TestChildRunSeries(t *testing.T) {
	m := New()
	defer func() { _ = m.Close() }()
	runs := []struct {
		agent, outcome string
		usage          activities.Usage
	}{
		{"scout", "completed", activities.Usage{Input: 100, Output: 20, Cost: 0.5}},
		{"scout", "subagent_timeout", activities.Usage{Input: 50, CacheRead: 7, Cost: 0.25}},
		{"oracle", "completed", activities.Usage{Output: 3}},
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
	for _, want := range []string{`subagents_tasks_started{agent="scout"} 2`, `some_gauge{agent="scout"} 1.5`, `some_latency_bucket{agent="scout"`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, err := m.Serve(ctx, addr, slog.Default()); err == nil {
		t.Error("a second server on a used address did not fail")
	}
}
