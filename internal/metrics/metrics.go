// Package metrics serves the worker's Prometheus metrics: the Temporal SDK's
// own (worker polls, task latencies, activity and workflow counts), fed
// through tally as the SDK's contrib handler does, and ours about child runs.
package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// secondsBuckets fit what is timed here: from a poll's milliseconds to a
// child run of an hour (the default timeout is 10 min, plus extensions).
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// maxAgents bounds the values of the agent label: a profile name comes from
// callers, and each new one is a new series; past this many the rest count
// as "other".
const maxAgents = 100

// agents hands out the agent label's values, at most maxAgents of them.
type agents struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (a *agents) label(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[name] {
		return name
	}
	if len(a.seen) >= maxAgents {
		return "other"
	}
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	a.seen[name] = true
	return name
}

// reportInterval is how often tally hands the SDK's counters to the
// Prometheus registry: well under any scrape interval.
const reportInterval = time.Second

// Metrics is one process's registry and the handles that feed it.
type Metrics struct {
	Registry *prometheus.Registry
	// Handler goes into the Temporal client's options.
	Handler client.MetricsHandler

	agents       *agents
	childSeconds *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	cost         *prometheus.CounterVec
	scope        io.Closer
}

// New builds a registry with the Go runtime's collectors, the SDK's metrics
// and ours.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		// The SDK's latencies run from milliseconds (polls, workflow tasks)
		// to an hour (an activity: one child pi run).
		DefaultHistogramBuckets: secondsBuckets,
		// A series the SDK registers twice with other labels is dropped,
		// not fatal: metrics must never stop a worker.
		OnRegisterError: func(error) {},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &tallyprom.DefaultSanitizerOpts,
	}, reportInterval)
	names := &agents{}
	m := &Metrics{
		Registry: reg,
		Handler:  sdkHandler{scope, names},
		agents:   names,
		childSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "subagents_child_run_seconds",
			Help: "Wall time of one child pi run (one attempt of a turn).",
			// From a cached one-line answer to the 600 s default timeout
			// and its extension.
			Buckets: secondsBuckets,
		}, []string{"agent", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "subagents_child_tokens_total",
			Help: "Tokens child pi runs used, by kind (input, output, cache_read, cache_write).",
		}, []string{"agent", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "subagents_child_cost_usd_total",
			Help: "What child pi runs cost, in US dollars, as pi's model prices say.",
		}, []string{"agent"}),
		scope: closer,
	}
	reg.MustRegister(m.childSeconds, m.tokens, m.cost)
	return m
}

// ChildRun records one child run; it implements activities.RunObserver.
func (m *Metrics) ChildRun(agent, outcome string, elapsed time.Duration, u api.Usage) {
	agent = m.agents.label(agent)
	m.childSeconds.WithLabelValues(agent, outcome).Observe(elapsed.Seconds())
	for kind, n := range map[string]int64{"input": u.Input, "output": u.Output, "cache_read": u.CacheRead, "cache_write": u.CacheWrite} {
		m.tokens.WithLabelValues(agent, kind).Add(float64(n))
	}
	m.cost.WithLabelValues(agent).Add(u.Cost)
}

// WatchPool publishes a worker's warm pool: its idle children, its hits
// (those that waited for a child still starting among them), misses and
// evictions, and its early starts, read from stats at each scrape. A second
// pool in the same process keeps the first one's series.
func (m *Metrics) WatchPool(stats func() api.PoolStats) {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "subagents_warm_pool_children",
			Help: "Child pi processes started ahead of tasks and waiting for one.",
		}, func() float64 { return float64(stats().Warm) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_warm_pool_hits_total",
			Help: "Child runs that took a warm child.",
		}, func() float64 { return float64(stats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_warm_pool_waited_total",
			Help: "Child runs that found their kind's warm child still starting and waited for it (counted in the hits too).",
		}, func() float64 { return float64(stats().Waited) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_warm_pool_misses_total",
			Help: "Child runs that found no warm child for their kind and started cold.",
		}, func() float64 { return float64(stats().Misses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_warm_pool_evictions_total",
			Help: "Warm children ended unused: past their time to live, over the memory cap, making room, or dead.",
		}, func() float64 { return float64(stats().Evictions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_early_start_children_total",
			Help: "Child pi processes started for tasks as their delegations were resolved (early start).",
		}, func() float64 { return float64(stats().EarlyStarted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "subagents_early_start_taken_total",
			Help: "Child runs that took a child started early for them.",
		}, func() float64 { return float64(stats().EarlyTaken) }),
	} {
		_ = m.Registry.Register(c)
	}
}

// Serve serves /metrics on addr until ctx ends and returns the address it
// listens on (addr may use port 0).
func (m *Metrics) Serve(ctx context.Context, addr string, logger *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", errcode.Errorf(errcode.InvalidInput, "metrics address %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		// A scrape in flight gets a moment to finish.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "error", err)
		}
	}()
	return ln.Addr().String(), nil
}

// Close flushes the SDK's last counts into the registry.
func (m *Metrics) Close() error { return m.scope.Close() }

// sdkHandler is the Temporal SDK's metrics handler over a tally scope.
type sdkHandler struct {
	scope  tally.Scope
	agents *agents
}

func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	if a, ok := tags["agent"]; ok {
		tags = maps.Clone(tags)
		tags["agent"] = h.agents.label(a)
	}
	return sdkHandler{h.scope.Tagged(tags), h.agents}
}

// Counter follows Prometheus' naming: a counter's name ends in _total (the
// SDK's own, temporal_long_request and the rest, and ours).
func (h sdkHandler) Counter(name string) client.MetricsCounter {
	if !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return h.scope.Counter(name)
}
func (h sdkHandler) Gauge(name string) client.MetricsGauge { return h.scope.Gauge(name) }
func (h sdkHandler) Timer(name string) client.MetricsTimer { return h.scope.Timer(name) }
