package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/connection"
)

// Serve runs a worker for cfg on c until ctx ends, then stops it. Once the
// worker polls, beside (if set) starts what serves next to it (the client
// protocol's socket): a client that reaches it finds a worker, not a queue
// nobody polls yet. What beside started stops before the worker does.
func Serve(ctx context.Context, c client.Client, cfg Config, logger *slog.Logger, stdout io.Writer, beside func() (stop func(), err error)) error {
	w, err := New(c, cfg)
	if err != nil {
		return err
	}
	if cfg.Metrics != nil && cfg.MetricsAddr != "" {
		addr, err := cfg.Metrics.Serve(ctx, cfg.MetricsAddr, logger)
		if err != nil {
			return err
		}
		defer func() { _ = cfg.Metrics.Close() }()
		logger.Info("metrics served", "url", "http://"+addr+"/metrics")
		_, _ = fmt.Fprintf(stdout, "Metrics:           http://%s/metrics\n", addr)
	}
	if err := w.Start(); err != nil {
		return connection.Unavailable("the configured Temporal", err)
	}
	// Stop waits for running activities up to the worker's stop timeout;
	// their pi children are ended with them and continue on the next worker.
	defer func() {
		w.Stop()
		logger.Info("worker stopped")
	}()
	if beside != nil {
		stop, err := beside()
		if err != nil {
			return err
		}
		defer stop()
	}
	logger.Info("worker started", "taskQueues", w.Queues, "pi", cfg.Pi.Path, "piVersion", cfg.Pi.Version,
		"piFrom", cfg.Pi.Source, "dataDir", cfg.DataDir)
	_, _ = fmt.Fprintf(stdout, "worker polling task queue %q and its host queue %q (pi %s)\n", w.Queues[0], w.Queues[1], cfg.Pi.Version)
	if cfg.WarmPool > 0 {
		_, _ = fmt.Fprintf(stdout, "Warm pool:         up to %d child pi processes, each kept %s unless a task takes it (--warm-pool 0: none)\n", cfg.WarmPool, cfg.WarmTTL)
	}
	if cfg.EarlyStart {
		_, _ = fmt.Fprintf(stdout, "Early start:       a task's child pi starts as its delegation is resolved, beside its session's start (--early-start=false: as its run begins)\n")
	}
	<-ctx.Done()
	return nil
}
