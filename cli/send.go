package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

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
	// A send that starts its session or runs a closed one again is a
	// delegation of the caller's, at its proven depth (caller.go); a
	// message to a running session is not, and needs no proof.
	var who client.StartRequest
	if err := cmd.fillDefaults(&who); err != nil {
		return err
	}
	req.Depth, req.Knobs = who.Depth, who.Knobs
	req.CallerDepth = func(ctx context.Context) (int, error) { return cmd.depth(ctx, c, who.Depth) }
	before := 0
	if !o.wait && !cmd.asJSON {
		// The session's turn before this send: the one a resumed session
		// runs next is later (printSent).
		before = sessionTurn(ctx, c, req.TaskID)
	}
	env, err := c.Send(ctx, req)
	if err != nil {
		return err
	}
	if !o.wait {
		return cmd.finishQuiet(env, func(env client.Envelope) { cmd.printSent(ctx, c, req.TaskID, before, env) })
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

// sendSeen bounds how long a `send` that resumed a session (through a
// delegation, the session being between turns or closed) watches the
// session for the turn it took: the turn shows within about 100 ms here
// (the delegation's first workflow task signals the session, or starts it
// again); three seconds cover a loaded machine, and past them the command
// says what it knows instead of holding the user.
const sendSeen = 3 * time.Second

// sendPoll is how often it asks the session meanwhile: a query each time.
const sendPoll = 50 * time.Millisecond

// sessionTurn is the session's running or last turn, 0 when unknown.
func sessionTurn(ctx context.Context, c *client.Client, id string) int {
	env, err := c.Status(ctx, id)
	if err != nil || len(env.Items) != 1 {
		return 0
	}
	return env.Items[0].Turn
}

// printSent says what a send did: which turn of which session took the
// prompt, where that turn stands, and how to wait for it. It printed
// "started delegation-…" for a session between turns, which said neither.
func (cmd *command) printSent(ctx context.Context, c *client.Client, id string, before int, env client.Envelope) {
	out := cmd.io.Out
	turn, where := env.AcceptedTurn, ""
	if turn > 0 {
		// The session ran a turn: the prompt is queued behind it.
		where = "queued"
		if len(env.Items) == 1 && env.Items[0].Turn > 0 && env.Items[0].Turn < turn {
			where = fmt.Sprintf("queued behind turn %d", env.Items[0].Turn)
		}
	} else {
		turn, where = resumedTurn(ctx, c, id, before)
	}
	if turn > 0 {
		_, _ = fmt.Fprintf(out, "session %s: turn %d accepted, %s\n", id, turn, where)
	} else {
		_, _ = fmt.Fprintf(out, "session %s: follow-up accepted; its turn starts when a worker takes it\n", id)
	}
	_, _ = fmt.Fprintf(out, "wait for it: subagents wait %s\n", id)
	if len(env.Items) == 1 && env.Items[0].UIURL != "" {
		_, _ = fmt.Fprintf(out, "  %s\n", env.Items[0].UIURL)
	}
}

// resumedTurn watches session id, for up to sendSeen, for a turn later
// than before: the one a send that resumed it took; 0 if none showed.
func resumedTurn(ctx context.Context, c *client.Client, id string, before int) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, sendSeen)
	defer cancel()
	tick := time.NewTicker(sendPoll)
	defer tick.Stop()
	for {
		if env, err := c.Status(ctx, id); err == nil && len(env.Items) == 1 && env.Items[0].Turn > before {
			it := env.Items[0]
			if it.Done {
				return it.Turn, "which ended already: " + it.Status
			}
			return it.Turn, "now " + it.Status
		}
		select {
		case <-ctx.Done():
			return 0, ""
		case <-tick.C:
		}
	}
}
