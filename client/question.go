package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// ReplyRequest is the answer to a child's question (`subagents reply`).
type ReplyRequest struct {
	// ID is the task whose child asked (its session), or the delegation it
	// belongs to when one task of it has a question waiting.
	ID string
	// QuestionID names the question answered (Item.Question.ID); empty:
	// the first one that waits.
	QuestionID string
	Message    string
	// By names who answers, for the history: the parent's session, an
	// operator.
	By string
}

// Reply answers a child's question: the session's workflow records the
// answer, and the child's next run reads it. The envelope is the task's
// status, its item's Question the question answered.
func (c *Client) Reply(ctx context.Context, req ReplyRequest) (Envelope, error) {
	msg := api.ReplyRequest{QuestionID: req.QuestionID, Message: req.Message, By: req.By}
	if err := msg.Validate(); err != nil {
		return Envelope{}, err
	}
	sid, err := c.askingSession(ctx, req.ID, req.QuestionID)
	if err != nil {
		return Envelope{}, err
	}
	h, err := c.updateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: sid, UpdateName: api.ReplyUpdate, WaitForStage: sdkclient.WorkflowUpdateStageCompleted, Args: []any{msg},
	})
	if err != nil {
		return Envelope{}, c.replyError(err, sid)
	}
	var q api.Question
	if err := h.Get(ctx, &q); err != nil {
		return Envelope{}, c.replyError(err, sid)
	}
	env, err := c.status(ctx, "reply", sid)
	if err != nil {
		return Envelope{}, err
	}
	if len(env.Items) == 1 {
		env.Items[0].Question = &q
	}
	return env, nil
}

// replyError is a refused reply's error; a session that has closed has
// no question to answer.
func (c *Client) replyError(err error, sid string) error {
	if isClosed(err) && !isNotFound(err) {
		return errcode.Errorf(errcode.InvalidInput, "session %s has ended: no question of it waits for an answer", sid)
	}
	return c.temporalError(err, sid)
}

// askingSession is the session that id names for a reply: id itself, the
// session of a one-task delegation, or the one task of a delegation whose
// child has a question waiting (questionID's, when given).
func (c *Client) askingSession(ctx context.Context, id, questionID string) (string, error) {
	desc, k, err := c.describe(ctx, id)
	if err != nil {
		return "", err
	}
	switch k {
	case kindSession:
		return id, nil
	case kindOneTask:
		return desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId(), nil
	}
	var st api.DelegationStatus
	if err := c.query(ctx, id, desc.GetWorkflowExecutionInfo().GetCloseTime() == nil, &st); err != nil {
		return "", err
	}
	var asking []string
	for _, t := range st.Tasks {
		if t.State.Terminal() || t.SessionID == "" {
			continue
		}
		_, ss, err := c.sessionStatus(ctx, "status", t.SessionID)
		if err != nil {
			continue
		}
		for _, q := range ss.Questions {
			if q.State == api.QuestionPending && (questionID == "" || q.ID == questionID) {
				asking = append(asking, t.SessionID)
				break
			}
		}
	}
	switch len(asking) {
	case 1:
		return asking[0], nil
	case 0:
		return "", errcode.Errorf(errcode.InvalidInput, "no task of %s has a question waiting for an answer", id)
	}
	return "", errcode.Errorf(errcode.InvalidInput, "%d tasks of %s have questions waiting: reply to one task's ID (%s)", len(asking), id, strings.Join(asking, ", "))
}

// QuestionFilter selects the questions Questions lists.
type QuestionFilter struct {
	// Cwd and ParentSessionID, when set, keep the sessions of that folder
	// or that parent pi session.
	Cwd             string
	ParentSessionID string
	// Limit bounds the answer (default 100, a page of `list`).
	Limit int
}

// Questions lists the tasks whose child waits for an answer, newest first:
// one item each, with its Question. The workflows' memo says which wait
// (one visibility call); each is then asked for its question itself.
func (c *Client) Questions(ctx context.Context, f QuestionFilter) (Envelope, error) {
	q, err := listQuery(ListFilter{Kind: string(kindSession), Cwd: f.Cwd, ParentSessionID: f.ParentSessionID, running: true})
	if err != nil {
		return Envelope{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	env := Envelope{ContractVersion: ContractVersion, Op: "questions", Backend: Backend, Items: []Item{}}
	var token []byte
	for len(env.Items) < limit {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return Envelope{}, c.temporalError(err, "")
		}
		for _, info := range resp.GetExecutions() {
			if len(env.Items) == limit {
				break
			}
			if memoString(info, "question") == "" {
				continue
			}
			sid := info.GetExecution().GetWorkflowId()
			e, _, err := c.sessionStatus(ctx, "questions", sid)
			if err != nil || len(e.Items) != 1 || e.Items[0].Question == nil {
				// Answered since the memo was read.
				continue
			}
			env.Items = append(env.Items, e.Items[0])
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	env.Count = len(env.Items)
	return env, nil
}

// QuestionText is how a waiting question reads to a person or a parent
// model: who asks, what, and how to answer.
func QuestionText(it Item) string {
	q := it.Question
	if q == nil {
		return ""
	}
	who := it.Agent
	if it.Name != "" {
		who += " (" + it.Name + ")"
	}
	verb := "asks"
	switch q.Reason {
	case api.ReasonInterviewRequest:
		verb = "asks for your input"
	case api.ReasonProgressUpdate:
		verb = "reports"
	}
	text := fmt.Sprintf("Subagent %s, task %s, %s (%s, question %s):\n\n%s", who, it.TaskID, verb, q.Reason, q.ID, q.Message)
	if q.State == api.QuestionPending {
		text += fmt.Sprintf("\n\nIts run waits for your answer until %s: subagents reply --question %s %s \"ANSWER\"",
			q.Deadline.UTC().Format("2006-01-02 15:04 UTC"), q.ID, it.TaskID)
	}
	return text
}

// WithQuestions sets, on each item of env whose task is not done, the
// question its child waits to have answered: a delegation's status, whose
// items come from the delegation, does not carry them. It costs a describe
// per running task; a question the memo shows is read from its session.
func (c *Client) WithQuestions(ctx context.Context, env *Envelope) {
	c.withQuestions(ctx, env, nil)
}

// withQuestions is WithQuestions that takes, from live, the sessions a
// status described already (their memo says whether a question waits).
func (c *Client) withQuestions(ctx context.Context, env *Envelope, live map[string]*liveSession) {
	for i := range env.Items {
		it := &env.Items[i]
		if it.Done || it.Question != nil || it.TaskID == "" {
			continue
		}
		if l, ok := live[it.TaskID]; ok {
			if !l.asks {
				continue
			}
		} else if desc, err := c.Temporal.DescribeWorkflowExecution(ctx, it.TaskID, ""); err != nil || memoString(desc.GetWorkflowExecutionInfo(), "question") == "" {
			continue
		}
		if _, st, err := c.sessionStatus(ctx, "status", it.TaskID); err == nil {
			it.Question = st.PendingQuestion()
		}
	}
}

// WaitOrQuestion is Wait that also ends, with WaitStatus "question", as
// soon as a task's child waits for an answer, the items then carrying the
// questions (QuestionText says them): a parent that waits for its tasks
// must, since their children wait for it in turn. The tasks go on.
func (c *Client) WaitOrQuestion(ctx context.Context, id string, timeout time.Duration) (Envelope, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		env Envelope
		err error
	}
	ended := make(chan answer, 1)
	go func() {
		env, err := c.Wait(wctx, id, timeout)
		ended <- answer{env, err}
	}()
	delay := firstPoll
	for {
		select {
		case a := <-ended:
			return a.env, a.err
		case <-time.After(delay):
		}
		delay = min(delay*2, c.pollInterval())
		env, err := c.status(ctx, "wait", id)
		if err != nil || env.Done {
			// The wait says how it ended.
			continue
		}
		// c.status has set the questions of the tasks still running.
		for _, it := range env.Items {
			if it.Question != nil {
				env.WaitStatus = "question"
				return env, nil
			}
		}
	}
}
