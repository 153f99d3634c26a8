package cli

import (
	"context"
	"flag"
	"time"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// waitOptions are `wait ID... [--timeout D | --timeout-ms N] [--progress] [--questions]`.
type waitOptions struct {
	timeout   time.Duration
	timeoutMS int
	progress  bool
	questions bool
}

func (o *waitOptions) register(fs *flag.FlagSet) {
	fs.Var(seconds{&o.timeout}, "timeout", "stop waiting after this long (the tasks go on; exit code 4): seconds or a duration like 30s")
	fs.IntVar(&o.timeoutMS, "timeout-ms", 0, "the same in milliseconds (the task contract's timeout_ms)")
	fs.BoolVar(&o.progress, "progress", false, "with --json: one line per status change (op \"progress\"), then the final envelope on one line")
	fs.BoolVar(&o.questions, "questions", false, "one ID: stop waiting, with wait_status \"question\" (exit code 4), once a task's child waits for an answer (docs/questions.md)")
}

func (o *waitOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	ids, err := cmd.needIDs()
	if err != nil {
		return err
	}
	timeout := o.timeout
	if o.timeoutMS > 0 {
		timeout = time.Duration(o.timeoutMS) * time.Millisecond
	}
	if o.questions {
		if len(ids) != 1 || o.progress {
			return errcode.New(errcode.InvalidInput, "--questions waits for one ID, without --progress")
		}
		env, err := c.WaitOrQuestion(ctx, ids[0], timeout)
		if err != nil {
			return err
		}
		return cmd.finish(env, func(env client.Envelope) { printTree(cmd.io.Out, env, false, c.CurrentTime()) })
	}
	if len(ids) == 1 && !cmd.asJSON {
		return cmd.follow(ctx, c, ids[0], timeout)
	}
	if o.progress {
		if len(ids) != 1 || !cmd.asJSON {
			return errcode.New(errcode.InvalidInput, "--progress needs --json and one ID")
		}
		return cmd.followLines(ctx, c, ids[0], timeout)
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var envs []client.Envelope
	for _, id := range ids {
		left := time.Duration(0)
		if !deadline.IsZero() {
			left = max(time.Until(deadline), time.Millisecond)
		}
		env, err := c.Wait(ctx, id, left)
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	return cmd.finish(combine("wait", envs), func(env client.Envelope) { printTree(cmd.io.Out, env, false, c.CurrentTime()) })
}
