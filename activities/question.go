package activities

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/durable-pi/subagents/api"
)

// A child asks its parent with contact_supervisor (extension/child/
// contact-supervisor.ts). The tool records nothing: a question ends the
// child's run at the call, and the run's result carries the call, read
// here from the session file the run wrote. The session's workflow then
// waits for the answer with nothing running, and sends it as the next
// run's prompt (workflows/question.go); a worker that dies meanwhile has
// nothing to lose.

// fillQuestions sets res.Questions from the contact_supervisor calls of
// the run: the session file's messages from res.MessagesBefore on. rows
// are the run's tool rows: a run that made no such call (nearly all) reads
// nothing.
func (a *Activities) fillQuestions(res *api.RunPiResult, rows []api.ToolRow) {
	if !slices.ContainsFunc(rows, func(r api.ToolRow) bool { return r.Name == api.ContactSupervisorToolName }) {
		return
	}
	msgs, err := readMessages(res.SessionFile)
	if err != nil {
		return
	}
	qs := runQuestions(msgs[min(max(res.MessagesBefore, 0), len(msgs)):], a.sanitizer)
	// The latest are what the session keeps (a question the run ended at
	// is the last), and a result stays small.
	res.Questions = qs[max(len(qs)-api.MaxQuestionsKept, 0):]
}

// askedQuestion reports whether msgs, what an interrupted attempt wrote,
// end the run at a question: the tool answered the call (the run was to
// pause there) and no finalize followed. Its retry then reads the result
// from the file, as it does a finalized run's, instead of asking the
// model to continue a run that waits for an answer.
func askedQuestion(msgs []SessionMessage) bool {
	if slices.ContainsFunc(msgs, func(m SessionMessage) bool {
		return m.Role == "toolResult" && m.ToolName == api.FinalizeToolName && !m.IsError
	}) {
		return false
	}
	return slices.ContainsFunc(runQuestions(msgs, nil), func(q api.Question) bool { return q.State == api.QuestionPending })
}

// runQuestions are the contact_supervisor calls of msgs whose tool
// accepted them (a call it refused, e.g. with an empty message, was
// answered with an error the model sees): a question pending, an update
// sent. z, when set, sanitizes each message before it is cut.
func runQuestions(msgs []SessionMessage, z *Sanitizer) []api.Question {
	accepted := map[string]bool{}
	for _, m := range msgs {
		if m.Role == "toolResult" && m.ToolName == api.ContactSupervisorToolName && !m.IsError {
			accepted[m.ToolCallID] = true
		}
	}
	var out []api.Question
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for _, b := range contentBlocks(m.Content) {
			if b.Type != "toolCall" || b.Name != api.ContactSupervisorToolName || !accepted[b.ID] {
				continue
			}
			var args struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b.Arguments, &args) != nil || !api.ValidReason(args.Reason) {
				continue
			}
			msg := strings.TrimSpace(args.Message)
			if z != nil {
				msg = z.Sanitize(msg)
			}
			q := api.Question{ID: b.ID, Reason: args.Reason, Message: clip(msg, api.MaxQuestionChars), State: api.QuestionPending}
			if !q.Waits() {
				q.State = api.QuestionSent
			}
			out = append(out, q)
		}
	}
	return out
}
