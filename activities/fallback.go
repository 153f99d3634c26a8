package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/profiles"
)

// FallbackPrompt is what a run sends when it goes on with the next of its
// fallback models (RunPiInput.FallbackModels). It goes on the same pi
// session file the failed model left: the task's prompt is in it already,
// with all that model did before it failed (its tool calls and their
// results), and pi leaves the failed answer itself (stop reason "error")
// out of what it sends the next model. Sending the task's prompt again
// would give the model the task twice, and a model that already called
// tools might do them again; this asks it to go on instead, as the
// continuation after a crash does (ContinuationPrompt). Where pi wrote
// nothing of the run (it failed before its first answer), the task's own
// prompt goes instead.
const FallbackPrompt = "The model that was working on this task failed with a provider error (a rate limit or an overload), and you are taking over. " +
	"Continue the same task from where it left off; do not start over. When you are done, call subagent_finalize with your result."

// FallbackPromptNoFinalize is the same for a profile without finalize.
const FallbackPromptNoFinalize = "The model that was working on this task failed with a provider error (a rate limit or an overload), and you are taking over. " +
	"Continue the same task from where it left off; do not start over, and end with your complete answer."

// fallbackErrorChars bounds a Fallback's error: the provider's message,
// which may quote a whole response body, in a result kept in history.
const fallbackErrorChars = 300

// A provider error another model may not have: pi puts the provider's HTTP
// status first in the last assistant message's errorMessage ("429: {...}",
// "529 status code (no body)"). 429 is a rate limit, 503 a service
// unavailable, 529 an overload; any other status (400 bad request, 401,
// 404, 500) would fail on another model too, or says the request itself is
// wrong. A message without a status falls back when it says so in words.
var (
	providerStatus = regexp.MustCompile(`^\s*(\d{3})\b`)
	busyStatuses   = []string{"429", "503", "529"}
	busyWords      = regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests|overloaded|service unavailable|resource[ _]exhausted`)
)

// providerBusy reports whether a provider error is one another model may
// not have (see busyStatuses).
func providerBusy(errorMessage string) bool {
	if m := providerStatus.FindStringSubmatch(errorMessage); m != nil {
		for _, s := range busyStatuses {
			if m[1] == s {
				return true
			}
		}
		return false
	}
	return busyWords.MatchString(errorMessage)
}

// worthFallback reports whether the run ended with a provider error that
// the next fallback model may not have: nothing stopped it, pi ran and the
// model's last answer failed with such an error.
func (r *childRun) worthFallback(out outcome) bool {
	s := &r.stream
	return out.stop == stopNone && out.spawnErr == nil && out.readErr == nil && s.CommandError == "" &&
		s.Finalize == nil && s.StopReason == "error" && providerBusy(s.ErrorMessage)
}

// validateFallbacks checks a run's fallback models as a profile's are
// checked: each provider/id[:thinking].
func validateFallbacks(refs []string) error {
	for _, ref := range refs {
		if _, _, _, err := profiles.ParseModelOverride(ref); err != nil {
			return errcode.Errorf(errcode.InvalidInput, "fallback model: %v", err)
		}
	}
	return nil
}

// withModel is in run on the fallback model ref: its thinking level, when
// it names one, else the run's.
func withModel(in api.RunPiInput, ref string) api.RunPiInput {
	provider, model, thinking, err := profiles.ParseModelOverride(ref)
	if err != nil {
		// validateFallbacks refused it before any run.
		in.Model = ref
		return in
	}
	in.Model = provider + "/" + model
	if thinking != "" {
		in.Thinking = thinking
	}
	return in
}

// fallbackAdmission is what a run on model is admitted with: a profile's
// apiKey is its model's provider's, and goes to a fallback model of the
// same provider only (another provider's key comes from the worker's
// environment, as for any child of that provider).
func fallbackAdmission(admission profiles.Admission, first, model string) profiles.Admission {
	provider := func(ref string) string { p, _, _ := strings.Cut(ref, "/"); return p }
	if provider(model) != provider(first) || provider(first) == "" {
		admission.APIKey = ""
	}
	return admission
}

// runModels runs the child on its model and, while a run ends with a
// provider error another model may not have (worthFallback), runs it again
// on the same session file with the next of its fallback models, in order:
// each model given up on goes into res.Fallbacks. Every run is a run of
// its own (a warm child of its model's kind when the pool has one, else a
// cold pi), and they share the turn's timeout and ceiling, the budget, the
// stream's counts and usage. It returns how the last run ended.
func (a *Activities) runModels(ctx context.Context, r *childRun, res *api.RunPiResult, admission profiles.Admission, prompt string) outcome {
	first := r.in
	models := append([]string{first.Model}, first.FallbackModels...)
	// A retry of an attempt that gave up on models goes on with the next
	// (the interrupted attempt heartbeated them, see RunPi).
	from := min(len(res.Fallbacks), len(models)-1)
	if from > 0 {
		r.in = withModel(first, models[from])
	}
	r.fallbacks = res.Fallbacks
	start := time.Now()
	for i := from; ; i++ {
		var spec warmSpec
		r.env, spec = a.runSpec(r.in, fallbackAdmission(admission, first.Model, r.in.Model))
		out := r.run(ctx, a.args(r.in, res.SessionFile), spec, res.SessionFile, prompt)
		r.spent = time.Since(start)
		out.elapsed = r.spent
		if i+1 >= len(models) || !r.worthFallback(out) || r.spent >= r.timeout || (r.ceiling > 0 && r.spent >= r.ceiling) {
			return out
		}
		given := api.Fallback{Model: cmp.Or(r.stream.Model, models[i]), Error: clip(a.sanitizer.Sanitize(r.stream.ErrorMessage), fallbackErrorChars)}
		res.Fallbacks = append(res.Fallbacks, given)
		r.fallbacks = res.Fallbacks
		activity.GetLogger(ctx).Warn("the model failed with a provider error: the child goes on with the next fallback model",
			"session", r.in.SessionID, "model", given.Model, "next", models[i+1], "error", given.Error)
		// Between runs the attempt still heartbeats: runs that fail fast
		// each end before their first tick, and the exit waited for below
		// takes seconds on a loaded machine.
		stopBeats := r.beatMeanwhile(ctx, start)
		if out.exiting != nil {
			// The session file is whole, and a warm child's slot in its
			// place, once that pi has exited.
			<-out.exiting
		}
		if msgs, _ := readMessages(res.SessionFile); len(msgs) > res.MessagesBefore {
			prompt = FallbackPrompt
			if first.NoFinalize {
				prompt = FallbackPromptNoFinalize
			}
			if err := hideFallbackPrompt(res.SessionFile); err != nil {
				// The next model reads the prompt twice: no reason to stop.
				activity.GetLogger(ctx).Warn("could not leave a failed fallback's prompt out of the session's context", "session", r.in.SessionID, "error", err)
			}
		}
		stopBeats()
		r.in = withModel(first, models[i+1])
		r.stream.nextRun()
	}
}

// hideFallbackPrompt keeps a fallback's prompt from reaching the next model
// twice. When the session file's last user message is FallbackPrompt and
// nothing after it but failed answers (the fallback model failed in its
// turn), it appends a context_edit entry that leaves that message out of
// what pi sends a model from now on (session-format.md: ContextEditEntry,
// replacement null); the raw file keeps it, so transcripts still show it.
// The next fallback's own prompt then says it once.
func hideFallbackPrompt(file string) error {
	entries, err := readEntries(file, maxSessionBytes)
	if err != nil {
		return err
	}
	target, leaf := "", ""
	for _, e := range entries {
		if id := e.str("id"); id != "" {
			leaf = id
		}
		m := e.message()
		if m == nil {
			continue
		}
		switch {
		case m.Role == "user":
			target = ""
			if t := strings.TrimSpace(messageText(m.Content)); t == FallbackPrompt || t == FallbackPromptNoFinalize {
				target = e.str("id")
			}
		case m.Role == "assistant" && (m.StopReason == "error" || m.StopReason == "aborted"):
			// pi leaves a failed answer out of the context itself.
		case m.Role == "assistant" || m.Role == "toolResult":
			target = ""
		}
	}
	if target == "" || leaf == "" {
		return nil
	}
	line, err := json.Marshal(map[string]any{"type": "context_edit", "id": newEntryID(), "parentId": leaf,
		"timestamp": entryTime(time.Now()), "targetId": target, "replacement": nil})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(line, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
