package e2e

import (
	"strings"
	"testing"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// sessionStatus is a session's status, by the status query (a closed
// session answers it too).
func (e *env) sessionStatus(id string) api.SessionStatus {
	e.t.Helper()
	v, err := shared.client.QueryWorkflow(e.ctx(), id, "", api.StatusQuery)
	if err != nil {
		e.t.Fatalf("status of %s: %v", id, err)
	}
	var st api.SessionStatus
	if err := v.Get(&st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestFallbackModelsOfAProfile: a profile's fallbackModels, through
// `subagents run`. Its model is rate limited (429), the first fallback
// overloaded (529): the task is done on the second fallback, in the same
// child session, told once what to do; the result records both models it
// gave up on, and the turn is one attempt (its runs heartbeat: under load
// the server once timed the attempt out, and its retry's result lost the
// fallbacks). A model refusing the request (400) is no reason to try
// another. Before: the profile did not load (an unknown field).
func TestFallbackModelsOfAProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(shared.client)
	c := e.cli()
	e.writeProfile("steady", "---\nname: steady\nmodel: "+scriptedmodel.ModelRef+"\nfallbackModels: "+
		scriptedmodel.SecondModelRef+", "+scriptedmodel.ThirdModelRef+"\ntools: read\n---\nYou work steadily.\n")
	e.model.Script("busy-models", scriptedmodel.Step{
		ToolCalls:   finalizeStep("the notes say ship it").ToolCalls,
		ModelStatus: map[string]int{scriptedmodel.ModelID: 429, scriptedmodel.SecondModelID: 529},
	})
	e.model.Script("refused", scriptedmodel.Step{
		ToolCalls:   finalizeStep("never").ToolCalls,
		ModelStatus: map[string]int{scriptedmodel.ModelID: 400},
	})

	t.Run("rate limited, then overloaded", func(t *testing.T) {
		env, out := c.json(0, "", "run", "--agent", "steady", "[[script:busy-models]] What do the notes say?")
		it := env.Items[0]
		if it.Status != string(api.StateCompleted) || it.Output != "the notes say ship it" || it.Error != nil {
			t.Fatalf("run: %s", out)
		}
		turn := e.sessionStatus(it.TaskID).LastTurn
		r := turn.Result
		if turn.ChildRuns != 1 || r.Attempt != 1 || r.Model != scriptedmodel.ThirdModelRef || len(r.Fallbacks) != 2 {
			t.Fatalf("child runs %d, attempt %d, model %q, fallbacks %+v", turn.ChildRuns, r.Attempt, r.Model, r.Fallbacks)
		}
		if f := r.Fallbacks[0]; f.Model != scriptedmodel.ModelRef || f.Error != `429: {"message":"Too Many Requests","type":"scripted_model_error"}` {
			t.Fatalf("first fallback %+v", f)
		}
		if f := r.Fallbacks[1]; f.Model != scriptedmodel.SecondModelRef || !strings.HasPrefix(f.Error, "529: ") {
			t.Fatalf("second fallback %+v", f)
		}
		reqs := e.model.RequestsFor("busy-models")
		var models []string
		for _, r := range reqs {
			models = append(models, r.Parsed.Model)
		}
		if strings.Join(models, ",") != strings.Join([]string{scriptedmodel.ModelID, scriptedmodel.SecondModelID, scriptedmodel.ThirdModelID}, ",") {
			t.Fatalf("the models asked: %v", models)
		}
		// The task once, and the one prompt that says to go on.
		if users := userTexts(reqs[2]); len(users) != 2 || !strings.HasSuffix(users[0], "[[script:busy-models]] What do the notes say?") ||
			users[1] != activities.FallbackPrompt {
			t.Fatalf("the third model was sent %q", users)
		}
	})

	t.Run("a bad request", func(t *testing.T) {
		env, out := c.json(1, "", "run", "--agent", "steady", "[[script:refused]] What do the notes say?")
		it := env.Items[0]
		if it.Error == nil || it.Error.Code != "SUBAGENT_FAILED" || !strings.HasPrefix(it.Error.Message, "400: ") {
			t.Fatalf("run: %s", out)
		}
		if r := e.sessionStatus(it.TaskID).LastTurn.Result; len(r.Fallbacks) != 0 || r.Model != scriptedmodel.ModelRef {
			t.Fatalf("fallbacks %+v, model %q", r.Fallbacks, r.Model)
		}
		if n := len(e.model.RequestsFor("refused")); n != 1 {
			t.Fatalf("%d requests for a refused task", n)
		}
	})
}
