package client

import (
	"context"
	"strings"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durable-pi/subagents/api"
)

// output and transcript: what a session wrote, read from its pi session
// file on the worker (the ReadSession workflow) where its status does not
// hold it whole.

// Output is a session's final text of its latest turn: capped as the tool
// results are, or the whole of it with full (read on the worker).
func (c *Client) Output(ctx context.Context, id string, full bool) (Envelope, error) {
	return c.OutputFrom(ctx, id, full, -1)
}

// OutputFrom is Output; from ≥ 0 asks for one page of the full output,
// from that character on (read on the worker), and NextFrom in the envelope
// says where the next page begins (0 after the last): an output too long
// for one answer is read whole page by page.
func (c *Client) OutputFrom(ctx context.Context, id string, full bool, from int) (Envelope, error) {
	env, st, err := c.sessionStatus(ctx, "output", id)
	if err != nil {
		return Envelope{}, err
	}
	it := &env.Items[0]
	env.Text = it.Output
	if env.Text == "" {
		env.Text = NoOutputText
	}
	if full && (it.OutputTruncated || from > 0) && st.LastTurn != nil {
		res, err := c.read(ctx, api.ReadRequest{SessionID: id, Agent: st.Agent, Cwd: st.Cwd, What: api.ReadOutput,
			Turn: st.LastTurn.Turn, Host: st.Host, Paged: from >= 0, From: max(from, 0)})
		if err != nil {
			return Envelope{}, err
		}
		if res.Found {
			env.Text, env.NextFrom = res.Text, res.Next
			it.Output, it.OutputTruncated, it.OutputReturnedChars = res.Text, res.Truncated, len([]rune(res.Text))
		}
	}
	return env, nil
}

// NoOutputText is the delegate contract's answer for a session without text.
const NoOutputText = "(no text output from sub-agent)"

// Transcript is every turn of a session, formatted as the delegate contract's
// get_subagent_session, read from the pi session file on the worker.
func (c *Client) Transcript(ctx context.Context, id string) (Envelope, error) {
	env, st, err := c.sessionStatus(ctx, "transcript", id)
	if err != nil {
		return Envelope{}, err
	}
	res, err := c.read(ctx, api.ReadRequest{SessionID: id, Agent: st.Agent, Cwd: st.Cwd, What: api.ReadTranscript, Runs: st.Runs, Host: st.Host})
	if err != nil {
		return Envelope{}, err
	}
	env.Text, env.MessageCount, env.TextTruncated = res.Text, res.MessageCount, res.Truncated
	if !res.Found || strings.TrimSpace(res.Text) == "" {
		env.Text = "(no messages yet: the sub-agent has not written its session file)"
	}
	return env, nil
}

// read runs the ReadSession workflow and returns what it read.
func (c *Client) read(ctx context.Context, req api.ReadRequest) (api.ReadResult, error) {
	var res api.ReadResult
	run, err := c.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:        "read-" + req.SessionID + "-" + c.id(),
		TaskQueue: c.TaskQueue,
		// Nobody looks at a finished read again: keep it out of the way.
		TypedSearchAttributes: temporal.NewSearchAttributes(api.AgentKey.ValueSet("reader")),
	}, api.ReadSessionWorkflowName, req)
	if err != nil {
		return res, c.temporalError(err, req.SessionID)
	}
	if err := run.Get(ctx, &res); err != nil {
		return res, c.temporalError(err, req.SessionID)
	}
	return res, nil
}
