package cli

import (
	"context"
	"flag"
	"strings"

	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/internal/errcode"
)

// sendOptions are `send ID PROMPT` or `send --input -` (a SendRequest).
type sendOptions struct {
	input, parentSession, agent string
	deliver, wait               bool
	files                       fileFlags
}

func (o *sendOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.input, "input", "", "read the request as JSON from this file, or - for stdin")
	fs.StringVar(&o.parentSession, "parent-session", "", "pi session ID that sends (delivery of the result)")
	fs.StringVar(&o.agent, "agent", "", "the agent the session runs; another is refused (the sessions contract: a session is its agent's)")
	fs.BoolVar(&o.deliver, "deliver", false, "keep the resuming delegation open until the parent acknowledges")
	fs.BoolVar(&o.wait, "wait", false, "wait for the turn to end and print its result")
	fs.Var(&o.files, "file", "file to put before the prompt (repeatable)")
}

func (o *sendOptions) run(ctx context.Context, cmd *command, c *client.Client) error {
	var req client.SendRequest
	if o.input != "" {
		if err := cmd.readJSON(o.input, &req); err != nil {
			return err
		}
	} else {
		if len(cmd.args) < 2 {
			return errcode.New(errcode.InvalidInput, "usage: subagents send ID PROMPT, or --input FILE")
		}
		req = client.SendRequest{TaskID: cmd.args[0], Prompt: strings.Join(cmd.args[1:], " "), Files: o.files,
			ParentSessionID: o.parentSession, Deliver: o.deliver, Agent: o.agent}
	}
	env, err := c.Send(ctx, req)
	if err != nil {
		return err
	}
	if !o.wait {
		return cmd.finishQuiet(env, cmd.printStarted)
	}
	id := env.DelegationID
	if id == "" {
		id = req.TaskID
	}
	if cmd.asJSON {
		done, err := c.Wait(ctx, id, 0)
		if err != nil {
			return err
		}
		done.Op = "send"
		return cmd.finish(done, nil)
	}
	return cmd.follow(ctx, c, id, 0)
}

func (o *sendOptions) readsStdin() bool { return o.input == "-" }
