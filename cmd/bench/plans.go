package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
	"github.com/durable-pi/subagents/profiles"
)

// Plans from inside pi (issue 32): a real parent pi whose model calls the
// task tool with a plan, against the floor of the same pi runs without
// Temporal, and the lanes pattern against the npm peer's runs.lanes doing
// the same work, side by side in one run.
//
// Every child, ours, the floor's and the peer's, answers the same scripted
// "done" at once (the bench script), so what differs is what runs them.

// The children's tasks. A step's task names what the step before it said,
// so that a run is checked to have passed each output on.
const (
	scoutTask     = "[[script:bench]] Scout the code for the change."
	implementTask = "[[script:bench]] Implement the change. The scout found: {steps.scout.output}"
	reviewTask    = "[[script:bench]] Review the change. The implementer said: {steps.implement.output}"
	writerTask    = "[[script:%s]] Write the %s part of the change."
	laneRevTask   = "[[script:%s]] Review the %s part of the change. The writer said: {steps.%s-writer.output}"
)

// sequencePlan is pattern 1: scout → implement → review, each step's task
// holding the previous step's output.
func sequencePlan() api.Plan {
	return api.Plan{Steps: []api.Step{
		{Key: "scout", Agent: "bench", Task: scoutTask},
		{Key: "implement", Agent: "bench", Task: implementTask},
		{Key: "review", Agent: "bench", Task: reviewTask},
	}}
}

// lanesPlan is pattern 3: lanes api and ui side by side, each a writer
// then a reviewer that reads the writer's output; every child the profile
// and script kind (bench, or bench-final: the finalize workload).
func lanesPlan(kind string) api.Plan {
	lane := func(name string) api.Step {
		return api.Step{Key: name, Steps: []api.Step{
			{Key: name + "-writer", Agent: kind, Task: fmt.Sprintf(writerTask, kind, name)},
			{Key: name + "-review", Agent: kind, Task: fmt.Sprintf(laneRevTask, kind, name, name)},
		}}
	}
	return api.Plan{Steps: []api.Step{{Parallel: []api.Step{lane("api"), lane("ui")}}}}
}

// peerLanesScript is pattern 3 as the peer writes it (its docs'
// workflows.md, "Parallel sequential lanes"): runs.lanes with the same
// stages, writer then reviewer, agents named by writer and reviewer. A
// later stage's task is fixed when the script starts (the helper passes
// no output between stages; its board returns none), so the reviewer's
// task names no writer's output.
func peerLanesScript(writer, reviewer string) string {
	stage := func(key, agent, task string) string {
		return fmt.Sprintf("{key: %q, agent: %q, task: %q}", key, agent, task)
	}
	lane := func(name string) string {
		return fmt.Sprintf("{key: %q, stages: [%s, %s]}", name,
			stage("writer", writer, fmt.Sprintf(writerTask, "bench", name)),
			stage("review", reviewer, "[[script:bench]] Review the "+name+" part of the change."))
	}
	return "const board = await runs.lanes([" + lane("api") + ", " + lane("ui") + "]);\n" +
		"return board.map((lane) => ({key: lane.key, state: lane.state, stages: lane.stages.map((s) => s.key + ':' + s.state)}));"
}

// peerSameAgent is the peer's agent that does our bench profile's work.
const peerSameAgent = "bench-peer"

// samePeer is the peer configured to do the work our children do (its
// docs: agents.md for the agent's fields, configuration.md for
// intercomBridge), in a pi config dir of its own so that the default
// configuration's row keeps every default: one agent file with the same
// tools, no extensions, no project or global context, no skills, and our
// profile's body added to pi's base prompt, as our child's system prompt
// is (the bench profile does not replace pi's prompt); acceptance "none",
// since the peer otherwise asks its child for evidence of the work; and
// its intercom bridge off, which otherwise adds contact_supervisor to the
// child's tools and its instructions to the child's prompt.
func (b *bench) samePeer(pr *peer) (*peer, error) {
	p := &peer{ext: pr.ext, agentDir: filepath.Join(b.root, "peer-agent-same")}
	if err := b.model.WritePiAgentDir(p.agentDir); err != nil {
		return nil, err
	}
	agent := "---\nname: " + peerSameAgent + "\ndescription: The bench profile's work\nmodel: " + scriptedmodel.ModelRef +
		"\ntools: " + strings.Join(profiles.ReadOnlyTools, ", ") +
		"\nextensions:\nsystemPromptMode: append\ninheritProjectContext: false\ninheritGlobalContext: false\ninheritSkills: false" +
		"\nacceptance: {\"level\":\"none\",\"reason\":\"bench\"}\n---\nAnswer briefly.\n"
	for path, text := range map[string]string{
		filepath.Join(p.agentDir, "agents", peerSameAgent+".md"):           agent,
		filepath.Join(p.agentDir, "extensions", "subagent", "config.json"): `{"intercomBridge": {"mode": "off"}}` + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// planRun is one kind of run of the plans section.
type planRun struct {
	d    []time.Duration
	peak int64
}

func (s *planRun) add(d time.Duration, p int64) { s.d = append(s.d, d); s.peak = max(s.peak, p) }

// plans measures pattern 1 and pattern 3 from inside pi, n rounds after a
// warm-up round, every kind once a round, in turn.
func (b *bench) plans(n int) (string, error) {
	for _, p := range []api.Plan{sequencePlan(), lanesPlan("bench"), lanesPlan("bench-final")} {
		if err := api.ValidatePlan(p); err != nil {
			return "", fmt.Errorf("the bench's plan: %w", err)
		}
	}
	// Each service serves its metrics: its warm pool's counters say how
	// each of our runs' children started.
	metrics := map[*service]string{}
	svc, err := b.startServiceMetrics("plans", metrics)
	if err != nil {
		return "", err
	}
	defer svc.stop()
	cold, err := b.startServiceMetrics("plans-cold", metrics, "--warm-pool", "0")
	if err != nil {
		return "", err
	}
	defer cold.stop()
	// The finalize workload's plans on a service of their own, as the pi
	// section's: one pool shared by two kinds of children would give each
	// kind's runs the other's.
	final, err := b.startServiceMetrics("plans-final", metrics)
	if err != nil {
		return "", err
	}
	defer final.stop()
	ext := mustAbs("extension")

	// The parents' scripts: one tool call, then the answer.
	b.model.Script("plan-sequence", toolStep("task", map[string]any{"plan": sequencePlan()}), textStep("done"))
	b.model.Script("plan-lanes", toolStep("task", map[string]any{"plan": lanesPlan("bench")}), textStep("done"))
	b.model.Script("plan-lanes-final", toolStep("task", map[string]any{"plan": lanesPlan("bench-final")}), textStep("done"))
	// The peer's default configuration: its builtin worker and reviewer,
	// as its own lanes example names them, unchanged, in the pi config dir
	// the pi section's peer rows use; and the peer configured as ours.
	pr, peerErr := b.installPeer()
	var same *peer
	if peerErr == nil {
		same, peerErr = b.samePeer(pr)
	}
	b.model.Script("peer-lanes-same", toolStep("subagent", map[string]any{"workflowScript": peerLanesScript(peerSameAgent, peerSameAgent), "async": false}), textStep("done"))
	b.model.Script("peer-lanes-default", toolStep("subagent", map[string]any{"workflowScript": peerLanesScript("worker", "reviewer"), "async": false}), textStep("done"))

	var seqGaps stepGaps
	// When the lanes' children made their model calls: pool off, warm, and
	// warm on the finalize workload.
	lanesCalls := [3]childCalls{{kind: "bench"}, {kind: "bench"}, {kind: "bench-final"}}
	// oursOf runs a parent pi on svc whose model runs script, and checks
	// that the plan ended well after children child runs of kind (the
	// children's profile and script) that passed each output on (passed:
	// a text each of its children's prompts must hold); ours is oursOf
	// the bench kind.
	oursOf := func(kind string, svc *service, script string, children int, passed []string, gaps *stepGaps, calls *childCalls, tally *poolTally) (time.Duration, int64, error) {
		before := len(b.model.Requests())
		was, err := poolCounters(metrics[svc])
		if err != nil {
			return 0, 0, err
		}
		var t0 time.Time
		d, p, _, err := b.parentPiChecked(svc.address, svc.dataDir, ext, "[[script:"+script+"]] Run the plan.", func() { t0 = time.Now() },
			func(out string) error { return toolEnded(out, "task") })
		if err != nil {
			return d, p, err
		}
		reqs := b.model.Requests()[before:]
		if err := childrenRan(reqs, kind, children, passed); err != nil {
			return d, p, err
		}
		if gaps != nil {
			gaps.add(t0, d, reqs)
		}
		if calls != nil {
			calls.add(reqs)
		}
		now, err := poolCounters(metrics[svc])
		if err != nil {
			return d, p, err
		}
		if tally != nil {
			tally.add(was, now, children)
		}
		return d, p, nil
	}
	ours := func(svc *service, script string, children int, passed []string, gaps *stepGaps, calls *childCalls, tally *poolTally) (time.Duration, int64, error) {
		return oursOf("bench", svc, script, children, passed, gaps, calls, tally)
	}
	peerRun := func(pr *peer, script string) (time.Duration, int64, error) {
		before := len(b.model.Requests())
		d, p, err := pr.runChecked(b, "[[script:"+script+"]] Run the lanes.", func(out string) error {
			result, err := toolResult(out, "subagent")
			if err != nil {
				return err
			}
			// The script returns each stage's state: every one completed.
			if w, r := strings.Count(result, "writer:completed"), strings.Count(result, "review:completed"); w != 2 || r != 2 {
				return fmt.Errorf("the lanes' board has %d writers and %d reviewers completed, want 2 and 2:\n%.3000s", w, r, result)
			}
			return nil
		})
		if err != nil {
			return d, p, err
		}
		return d, p, childrenRan(b.model.Requests()[before:], "bench", 4, nil)
	}
	// The floors: pi alone, the parent's run and then the children's, in
	// sequence for pattern 1; for pattern 3 the two lanes at once, each
	// lane's two runs one after the other.
	seqFloor := func() (time.Duration, int64, error) {
		return sampled(func() error {
			for range 4 {
				if _, err := b.direct(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	lanesFloorOf := func(final bool) (time.Duration, int64, error) {
		return sampled(func() error {
			if _, err := b.direct(); err != nil {
				return err
			}
			errs := make(chan error, 2)
			for range 2 {
				go func() {
					for range 2 {
						if _, err := b.directRun(final); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			return errors.Join(<-errs, <-errs)
		})
	}
	seqPassed := []string{"The scout found: done", "The implementer said: done"}
	lanesPassed := []string{"The writer said: done"}

	var floor1, seqCold, seqWarm, floor3, lanesCold, lanesWarm, floor3F, lanesWarmF, peerSame, peerDefault planRun
	// How our runs' children started: pattern 1 pool off and warm, pattern
	// 3 pool off and warm, pattern 3 warm on the finalize workload.
	var tallies [5]poolTally
	type kind struct {
		into *planRun
		run  func() (time.Duration, int64, error)
		// ours: a run of this project's plan (measured only if the
		// extension's task tool takes one).
		ours, peer bool
	}
	kinds := []kind{
		{into: &floor1, run: seqFloor},
		{into: &seqCold, run: func() (time.Duration, int64, error) {
			return ours(cold, "plan-sequence", 3, seqPassed, nil, nil, &tallies[0])
		}, ours: true},
		{into: &seqWarm, run: func() (time.Duration, int64, error) {
			return ours(svc, "plan-sequence", 3, seqPassed, &seqGaps, nil, &tallies[1])
		}, ours: true},
		{into: &floor3, run: func() (time.Duration, int64, error) { return lanesFloorOf(false) }},
		{into: &lanesCold, run: func() (time.Duration, int64, error) {
			return ours(cold, "plan-lanes", 4, lanesPassed, nil, &lanesCalls[0], &tallies[2])
		}, ours: true},
		{into: &lanesWarm, run: func() (time.Duration, int64, error) {
			return ours(svc, "plan-lanes", 4, lanesPassed, nil, &lanesCalls[1], &tallies[3])
		}, ours: true},
		{into: &floor3F, run: func() (time.Duration, int64, error) { return lanesFloorOf(true) }},
		{into: &lanesWarmF, run: func() (time.Duration, int64, error) {
			return oursOf("bench-final", final, "plan-lanes-final", 4, lanesPassed, nil, &lanesCalls[2], &tallies[4])
		}, ours: true},
		{into: &peerSame, run: func() (time.Duration, int64, error) { return peerRun(same, "peer-lanes-same") }, peer: true},
		{into: &peerDefault, run: func() (time.Duration, int64, error) { return peerRun(pr, "peer-lanes-default") }, peer: true},
	}
	// Ours is measured only where the extension takes a plan: a first run
	// says so (and warms the service up).
	_, _, oursErr := ours(svc, "plan-sequence", 3, seqPassed, nil, nil, nil)
	// What each side's children were given, from the first round's model
	// requests: the system prompt and the tools of our lane writer's child
	// and the peer's.
	prompts := childPrompts{}
	for i := range n + 1 {
		if i == 1 {
			// What the warm-up round's runs noted is not a measure.
			seqGaps, tallies = stepGaps{}, [5]poolTally{}
			for i := range lanesCalls {
				lanesCalls[i].at = nil
			}
		}
		for _, k := range kinds {
			if (k.ours && oursErr != nil) || (k.peer && peerErr != nil) {
				continue
			}
			// A warm pool refills after a run, and an early-started
			// child ends after it: measured runs do not share the
			// machine with that work.
			svc.quiet()
			cold.quiet()
			final.quiet()
			before := len(b.model.Requests())
			d, p, err := k.run()
			if err != nil {
				return "", err
			}
			if i == 0 {
				if k.into == &lanesWarm || k.peer {
					prompts.note(!k.peer, b.model.Requests()[before:])
				}
			} else {
				k.into.add(d, p)
			}
		}
	}

	var r strings.Builder
	r.WriteString("\n## Plans from inside pi\n\n")
	fmt.Fprintf(&r, "Issue 32's patterns 1 and 3 as a pi user runs them: a real parent pi (`--mode json -e ./extension`, scripted model) whose model calls the `task` tool with a `plan` (the plan document as JSON, api.Plan), waits for its result and answers; every child is the `bench` profile (tools %s, its body \"Answer briefly.\" added to pi's prompt) answering at once. ", strings.Join(profiles.ReadOnlyTools, ", "))
	fmt.Fprintf(&r, "Each kind of run once a round, in turn, %d rounds after a warm-up round, against the floor of the same pi runs without Temporal (`--no-extensions`, as the other floors): the parent's run, then the children's. The service is a `subagents dev` process reached on its socket, with its warm pool (4) or `--warm-pool 0` (early start). Peak memory as above (the service left out; the peer's children are in its parent's process).\n\n", n)
	if len(sections) > 0 {
		// Run apart from a whole bench: say how, since the page's header
		// names the whole one.
		fmt.Fprintf(&r, "Measured apart from the rest of this page: `go run ./cmd/bench %s` (%s, same machine).\n\n", benchArgs(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	}
	if oursErr != nil {
		fmt.Fprintf(&r, "This project's plans were not measured: the extension's `task` tool did not run a plan: %s\n\n", firstLine(oursErr.Error()))
	}
	row := func(name string, s planRun, floor planRun, target string) {
		if len(s.d) == 0 {
			return
		}
		ratio := float64(pct(s.d, 0.5)) / float64(pct(floor.d, 0.5))
		fmt.Fprintf(&r, "| %s | %s | %s | %.2f× | %s | %d MiB |\n", name, ms(pct(s.d, 0.5)), ms(pct(s.d, 0.99)), ratio, target, s.peak>>20)
	}
	r.WriteString("**Pattern 1**, scout → implement → review, each step's task holding the output of the step before it (`{steps.scout.output}`, `{steps.implement.output}`):\n\n")
	r.WriteString("| run | p50 | p99 | ratio p50 | target | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row("floor: parent, then 3 children one after another", floor1, floor1, "")
	row("parent pi, `task` with a plan of 3 steps in sequence, pool off (`--warm-pool 0`: early start)", seqCold, floor1, "")
	row("parent pi, `task` with a plan of 3 steps in sequence, warm pool", seqWarm, floor1, "≤ 1.0×")
	r.WriteString(paragraph(seqGaps.report(), tallies[0].report("pool off"), tallies[1].report("warm pool")))
	r.WriteString("\n**Pattern 3**, two lanes (api, ui) at once, each a writer then a reviewer:\n\n")
	r.WriteString("| run | p50 | p99 | ratio p50 | against the peer configured as ours | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row3 := func(name string, s planRun) {
		if len(s.d) == 0 {
			return
		}
		against := ""
		if len(peerSame.d) > 0 {
			against = fmt.Sprintf("%.2f×", float64(pct(s.d, 0.5))/float64(pct(peerSame.d, 0.5)))
		}
		fmt.Fprintf(&r, "| %s | %s | %s | %.2f× | %s | %d MiB |\n", name, ms(pct(s.d, 0.5)), ms(pct(s.d, 0.99)),
			float64(pct(s.d, 0.5))/float64(pct(floor3.d, 0.5)), against, s.peak>>20)
	}
	row3("floor: parent, then the 2 lanes at once, each 2 children one after another", floor3)
	row3("parent pi, `task` with a plan of 2 parallel lanes of 2 steps, pool off (`--warm-pool 0`: early start)", lanesCold)
	row3("parent pi, `task` with a plan of 2 parallel lanes of 2 steps, warm pool", lanesWarm)
	row3("npm peer "+peerVersion+", `subagent` with a `workflowScript` of `runs.lanes`, its agent configured as ours (below)", peerSame)
	row3("npm peer "+peerVersion+", the same `runs.lanes` with its default agents `worker` and `reviewer` (below)", peerDefault)
	var why string
	if tallies[3].misses > 0 {
		// From the pool's rules (activities/pool.go): what a plan whose
		// steps follow each other at once meets.
		why = fmt.Sprintf("The warm pool keeps twice the most children of a kind that ran at once, and a run that finds none idle waits for one still starting; %d of the warm runs' %d children found neither and started cold.",
			tallies[3].misses, tallies[3].children)
	}
	r.WriteString(paragraph(lanesCalls[0].report("pool off"), lanesCalls[1].report("warm pool"), tallies[2].report("pool off"), tallies[3].report("warm pool"), why))
	r.WriteString("\n**Pattern 3 on the finalize workload**: the same plan, every child the `bench-final` profile (finalize on, as every profile's child runs by default), answering with a `subagent_finalize` call whose result is the step's output; the floor's plain children load the same finalize extension and answer with the same call. Its warm runs go to a `subagents dev` of their own (pool of 4), as the pi section's finalize rows do.\n\n")
	r.WriteString("| run | p50 | p99 | ratio p50 | target | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row("floor: parent, then the 2 lanes at once, each 2 children one after another (each with the finalize extension)", floor3F, floor3F, "")
	row("parent pi, `task` with a plan of 2 parallel lanes of 2 steps, warm pool", lanesWarmF, floor3F, "≤ 1.0×")
	r.WriteString(paragraph(lanesCalls[2].report("warm pool"), tallies[4].report("warm pool")))
	if peerErr != nil {
		fmt.Fprintf(&r, "\nThe npm peer %s was not measured: %s\n", peerVersion, firstLine(peerErr.Error()))
	} else {
		r.WriteString(peerNote(prompts))
	}
	return r.String(), nil
}

// peerNote says how each side of pattern 3 was configured.
func peerNote(p childPrompts) string {
	var r strings.Builder
	r.WriteString("\nHow each side of pattern 3 was configured. Ours: the plan `{\"steps\":[{\"parallel\":[{\"key\":\"api\",\"steps\":[writer, reviewer]},{\"key\":\"ui\",...}]}]}`, every step the `bench` profile (`finalize: false`, tools " +
		strings.Join(profiles.ReadOnlyTools, ", ") + ", its body \"Answer briefly.\" appended to pi's prompt), a reviewer's task holding its writer's output (`{steps.api-writer.output}`); each child is a pi process of its own (`--no-extensions`), under the service. ")
	r.WriteString("The peer: its parent pi (`-e` the installed package, a pi config dir of its own with the scripted model) calls its `subagent` tool once, `async: false` (the parent waits, as ours does), with a `workflowScript` of `runs.lanes` of the same two lanes of two stages and the same scripted child answers; its children run as sessions inside its parent's process. ")
	r.WriteString("Its lanes pass nothing between stages (a stage's task is fixed when the script starts; the helper's board returns no output), so its reviewers' tasks do not hold their writer's output. ")
	fmt.Fprintf(&r, "Configured as ours: one agent file in its user agents folder, `%s`, with `tools: %s`, `extensions:` (empty: none), `systemPromptMode: append` and the body \"Answer briefly.\", `inheritProjectContext: false`, `inheritGlobalContext: false`, `inheritSkills: false`, the scripted model, `acceptance: {level: none}` (else it asks its child for evidence of the work); and in its config (`extensions/subagent/config.json`) `intercomBridge.mode: off` (else it adds `contact_supervisor` to the child's tools and its instructions to the child's prompt). ",
		peerSameAgent, strings.Join(profiles.ReadOnlyTools, ", "))
	r.WriteString(p.sameReport())
	r.WriteString("Its default configuration, the second peer row: its builtin agents `worker` (the writers) and `reviewer`, as its own lanes example names them, in a pi config dir with no config of the peer's; ")
	r.WriteString("per their files: `worker` with tools read, grep, find, ls, bash, edit, write, contact_supervisor, `defaultContext: fork` (it starts from a copy of the parent's conversation), `defaultReads: context.md, plan.md`, `defaultProgress: true`; `reviewer` with tools read, grep, find, ls, contact_supervisor; both `thinking: high` (the scripted model ignores it), their own system prompts in place of pi's, `inheritProjectContext: true` (this bench's folder has no context file), `inheritSkills: false`, the intercom bridge on. ")
	r.WriteString(p.defaultReport())
	r.WriteString("\n")
	return r.String()
}

// childPrompts keeps the first model request of each kind of child: ours
// (a lane's), and the peer's by agent (the peer tags each child's system
// prompt with it), for the note.
type childPrompts map[string]*scriptedmodel.Request

// activeAgent finds the peer's tag of a child's agent.
var activeAgent = regexp.MustCompile(`<active_agent name="([^"]+)"/>`)

func (c childPrompts) note(ours bool, reqs []scriptedmodel.Request) {
	for i := range reqs {
		if reqs[i].Script != "bench" {
			continue
		}
		who := "ours"
		if !ours {
			m := activeAgent.FindStringSubmatch(systemPrompt(&reqs[i]))
			if m == nil {
				continue
			}
			who = m[1]
		}
		if c[who] == nil {
			c[who] = &reqs[i]
		}
	}
}

func systemPrompt(r *scriptedmodel.Request) string {
	for _, m := range r.Parsed.Messages {
		if m.Role == "system" || m.Role == "developer" {
			return m.Text()
		}
	}
	return ""
}

func toolNames(r *scriptedmodel.Request) string {
	var names []string
	for _, t := range r.Parsed.Tools {
		names = append(names, t.Function.Name)
	}
	return strings.Join(names, ", ")
}

// sameReport compares our child's request with the peer's configured as
// ours: system prompt, tools, the conversation it starts with.
func (c childPrompts) sameReport() string {
	ours, peer := c["ours"], c[peerSameAgent]
	if ours == nil || peer == nil {
		return ""
	}
	a, b := systemPrompt(ours), systemPrompt(peer)
	var same string
	// The peer puts a fixed child boundary before every child's prompt
	// and its agent's tag before the agent's body: what is left is
	// compared with ours.
	first, _, _ := strings.Cut(a, "\n")
	if at := strings.Index(b, first); a != b && at > 0 {
		boundary := strings.TrimSpace(b[:at])
		rest := strings.Replace(b[at:], `<active_agent name="`+peerSameAgent+`"/>`+"\n\n", "", 1)
		if rest == a {
			same = fmt.Sprintf("the peer's is ours with its own %d lines before it (its child boundary, \"%s …\") and `<active_agent name=\"%s\"/>` before our body",
				strings.Count(boundary, "\n")+1, firstLine(boundary), peerSameAgent)
		}
	}
	switch {
	case a == b:
		same = "the same"
	case same == "":
		same = fmt.Sprintf("not the same (ours %d characters, the peer's %d; they first differ at character %d)", len(a), len(b), firstDiff(a, b))
	}
	return fmt.Sprintf("Read from the model requests: the children's system prompts: %s; their tools: ours %s, the peer's %s; their first request's messages: ours %d, the peer's %d. ",
		same, toolNames(ours), toolNames(peer), len(ours.Parsed.Messages), len(peer.Parsed.Messages))
}

// defaultReport says what the peer's default agents' children were given.
func (c childPrompts) defaultReport() string {
	var parts []string
	for _, agent := range []string{"worker", "reviewer"} {
		if r := c[agent]; r != nil {
			parts = append(parts, fmt.Sprintf("`%s` tools %s, a system prompt of %d characters, %d messages", agent, toolNames(r), len(systemPrompt(r)), len(r.Parsed.Messages)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Read from their first model requests: " + strings.Join(parts, "; ") + "."
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// stepGaps splits runs of a parent pi whose plan ran steps one after
// another at the model calls: the parent's, each step's child's, the
// parent's again.
type stepGaps struct {
	start, first, handOff, back, end []time.Duration
}

func (g *stepGaps) add(t0 time.Time, total time.Duration, reqs []scriptedmodel.Request) {
	if len(reqs) < 4 || t0.IsZero() {
		return
	}
	last := len(reqs) - 1
	g.start = append(g.start, reqs[0].Time.Sub(t0))
	g.first = append(g.first, reqs[1].Time.Sub(reqs[0].Time))
	for i := 2; i < last; i++ {
		g.handOff = append(g.handOff, reqs[i].Time.Sub(reqs[i-1].Time))
	}
	g.back = append(g.back, reqs[last].Time.Sub(reqs[last-1].Time))
	g.end = append(g.end, t0.Add(total).Sub(reqs[last].Time))
}

func (g *stepGaps) report() string {
	if len(g.start) == 0 {
		return ""
	}
	return fmt.Sprintf("Where the warm plan's time goes (medians, from the model calls): the parent's start to its first model call %s; "+
		"that call to the first step's child's model call (the tool call, the service, the plan's first session, a warm child) %s; "+
		"one step's model call to the next step's (the child's answer, its session's end, the plan's next session, a warm child) %s; "+
		"the last step's call to the parent's next one %s; the parent's last call to its exit %s. In the floor, one run's model call to the next run's is a pi start.",
		ms(pct(g.start, 0.5)), ms(pct(g.first, 0.5)), ms(pct(g.handOff, 0.5)), ms(pct(g.back, 0.5)), ms(pct(g.end, 0.5)))
}

// childCalls keeps when the children of a run made their model calls,
// in order, from the parent's first: measured runs only.
type childCalls struct {
	kind string // the children's script
	at   [][]time.Duration
}

func (c *childCalls) add(reqs []scriptedmodel.Request) {
	if len(reqs) == 0 {
		return
	}
	k := 0
	for _, r := range reqs {
		if r.Script != c.kind {
			continue
		}
		if k == len(c.at) {
			c.at = append(c.at, nil)
		}
		c.at[k] = append(c.at[k], r.Time.Sub(reqs[0].Time))
		k++
	}
}

func (c *childCalls) report(kind string) string {
	if len(c.at) == 0 {
		return ""
	}
	var at []string
	for _, d := range c.at {
		at = append(at, ms(pct(d, 0.5)))
	}
	return fmt.Sprintf("%s, the children's model calls after the parent's first, in order (medians): %s.", strings.ToUpper(kind[:1])+kind[1:], strings.Join(at, ", "))
}

// childrenRan checks that a run reached n child model calls of the kind's
// script, and that for each text of passed some child's prompt held it
// (an output passed on).
func childrenRan(reqs []scriptedmodel.Request, kind string, n int, passed []string) error {
	var prompts []string
	for _, r := range reqs {
		if r.Script != kind {
			continue
		}
		var user []string
		for _, m := range r.Parsed.Messages {
			if m.Role == "user" {
				user = append(user, m.Text())
			}
		}
		prompts = append(prompts, strings.Join(user, "\n"))
	}
	if len(prompts) != n {
		return fmt.Errorf("the run reached %d child model calls, want %d", len(prompts), n)
	}
	for _, p := range passed {
		found := false
		for _, q := range prompts {
			found = found || strings.Contains(q, p)
		}
		if !found {
			return fmt.Errorf("no child's prompt holds %q (an output not passed on)", p)
		}
	}
	return nil
}

// toolEnded checks pi's JSON events out for the end of a call of tool
// that is not an error.
func toolEnded(out, tool string) error {
	_, err := toolResult(out, tool)
	return err
}

// toolResult is the result's text of the first call of tool in pi's
// JSON events out, or why there is none that is not an error.
func toolResult(out, tool string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct {
			Type     string          `json:"type"`
			ToolName string          `json:"toolName"`
			IsError  bool            `json:"isError"`
			Result   json.RawMessage `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "tool_execution_end" || ev.ToolName != tool {
			continue
		}
		if ev.IsError {
			return "", fmt.Errorf("the %s tool failed: %.1500s", tool, ev.Result)
		}
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(ev.Result, &res)
		var text []string
		for _, c := range res.Content {
			text = append(text, c.Text)
		}
		return strings.Join(text, "\n"), nil
	}
	return "", fmt.Errorf("no end of a %s tool call in the parent's events", tool)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// poolTally counts how the children of one kind of run started, from the
// service's pool counters around each run.
type poolTally struct {
	children, hits, waited, misses, early int
}

func (t *poolTally) add(was, now map[string]float64, children int) {
	t.children += children
	t.hits += int(now["subagents_warm_pool_hits_total"] - was["subagents_warm_pool_hits_total"])
	t.waited += int(now["subagents_warm_pool_waited_total"] - was["subagents_warm_pool_waited_total"])
	t.misses += int(now["subagents_warm_pool_misses_total"] - was["subagents_warm_pool_misses_total"])
	t.early += int(now["subagents_early_start_taken_total"] - was["subagents_early_start_taken_total"])
}

func (t *poolTally) report(kind string) string {
	if t.children == 0 {
		return ""
	}
	return fmt.Sprintf("%s: of %d children, %d took a warm child (%d of them waited for it to finish starting), %d took one started early for it, %d started cold (the service's pool counters).",
		strings.ToUpper(kind[:1])+kind[1:], t.children, t.hits, t.waited, t.early, t.misses)
}

// startServiceMetrics is startService serving its metrics on a port of
// its own, noted in metrics.
func (b *bench) startServiceMetrics(name string, metrics map[*service]string, extra ...string) (*service, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort())
	s, err := b.startService(name, append([]string{"--metrics-addr", addr}, extra...)...)
	if err == nil {
		metrics[s] = addr
	}
	return s, err
}

// poolCounters reads the warm pool's counters (subagents_warm_pool_*,
// subagents_early_start_*) from the metrics at addr.
func poolCounters(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !(strings.HasPrefix(f[0], "subagents_warm_pool_") || strings.HasPrefix(f[0], "subagents_early_start_")) {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

// paragraph joins the sentences that are not empty into a paragraph of
// its own below a table.
func paragraph(sentences ...string) string {
	var kept []string
	for _, s := range sentences {
		if s != "" {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return "\n" + strings.Join(kept, " ") + "\n"
}

// benchArgs are this run's flags but -out.
func benchArgs() string {
	var args []string
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		switch {
		case a == "-out" || a == "--out":
			i++
		case strings.HasPrefix(a, "-out=") || strings.HasPrefix(a, "--out="):
		default:
			args = append(args, a)
		}
	}
	return strings.Join(args, " ")
}
