package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/internal/scriptedmodel"
)

// delegationPhases splits runs of a parent pi that delegates one task at
// the model calls it and its child make: parent, child, parent again.
type delegationPhases struct {
	start, handOff, answer, end []time.Duration
}

func toolStep(name string, args any) scriptedmodel.Step {
	b, _ := json.Marshal(args)
	return scriptedmodel.Step{ToolCalls: []scriptedmodel.ToolCall{{Name: name, Arguments: string(b)}}}
}

func textStep(text string) scriptedmodel.Step { return scriptedmodel.Step{Text: text} }

func stepsJSON(steps ...scriptedmodel.Step) string {
	b, _ := json.Marshal(steps)
	return string(b)
}

// fromPi measures delegation as a pi user meets it: a real parent pi with
// the extension, whose model asks for one task (the subagent tool) or four
// (delegate_to_subagents), against the floor of the same pi runs without
// Temporal: the parent's and the children's, the children of a batch started
// together. The peak memory is that of every process this bench started
// (parent pi, subagents commands, child pi), sampled every 10 ms; the
// embedded server and worker run inside the bench process and are reported
// apart.
//
// startOnly runs the start rows alone (-only start), n rounds of them.
func (b *bench) fromPi(n int, startOnly bool) (string, error) {
	svc, err := b.startService("pi")
	if err != nil {
		return "", err
	}
	defer svc.stop()
	cold, err := b.startService("pi-cold", "--warm-pool", "0")
	if err != nil {
		return "", err
	}
	defer cold.stop()
	// The finalize workload's delegations on a service of their own: their
	// children are another kind (profile bench-final), and one pool of 4
	// shared by two kinds gives each kind's first delegation of a round
	// the other kind's children, and a cold start.
	final, err := b.startService("pi-final")
	if err != nil {
		return "", err
	}
	defer final.stop()
	ext := mustAbs("extension")
	// The delegations of a kind of child: its profile and its script share
	// kind's name. bench answers at once (finalize: false); bench-final,
	// the finalize workload, calls subagent_finalize.
	oneOf := func(kind string) string {
		return "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{"agent": kind, "task": "[[script:" + kind + "]] Say done."}), textStep("done")) + "]] Delegate."
	}
	fourOf := func(kind string) string {
		var tasks []map[string]string
		for i := range 4 {
			tasks = append(tasks, map[string]string{"name": fmt.Sprintf("t%d", i), "prompt": "[[script:" + kind + "]] Say done.", "profile": kind})
		}
		return "[[steps:" + stepsJSON(toolStep("delegate_to_subagents", map[string]any{"tasks": tasks}), textStep("done")) + "]] Delegate four."
	}
	one, four := oneOf("bench"), fourOf("bench")
	oneFinal, fourFinal := oneOf("bench-final"), fourOf("bench-final")
	none := "[[steps:" + stepsJSON(textStep("done")) + "]] Answer."
	// own is the peak of the processes the parents started themselves
	// (their descendants, pi excluded), over every delegating run.
	var own int64
	parentOn := func(svc *service, prompt string) (time.Duration, int64, error) {
		d, peak, started, err := b.parentPi(svc, ext, prompt)
		own = max(own, started)
		return d, peak, err
	}
	parent := func(prompt string) (time.Duration, int64, error) { return parentOn(svc, prompt) }
	// checked is parentOn that fails unless the delegation reached its n
	// children of kind.
	checked := func(kind string, svc *service, prompt string, n int) (time.Duration, int64, error) {
		children := len(b.model.RequestsFor(kind))
		d, p, err := parentOn(svc, prompt)
		if err == nil {
			err = b.childrenAnswered(kind, children, n)
		}
		return d, p, err
	}
	// timedOne is checked for a one-task delegation, noting into ph where
	// its time went.
	timedOne := func(kind string, svc *service, prompt string, ph *delegationPhases) (time.Duration, int64, error) {
		before, children := len(b.model.Requests()), len(b.model.RequestsFor(kind))
		var t0 time.Time
		d, p, started, err := b.parentPiAt(svc.address, svc.dataDir, ext, prompt, func() { t0 = time.Now() })
		own = max(own, started)
		if err == nil {
			err = b.childrenAnswered(kind, children, 1)
		}
		if err == nil {
			ph.add(t0, d, b.model.Requests()[before:])
		}
		return d, p, err
	}
	plainOf := func(k int, final bool) (time.Duration, int64, error) {
		// One plain run, then k started together: the parent's run and its
		// children's, as fast as pi alone can do them.
		return sampled(func() error {
			if _, err := b.direct(); err != nil {
				return err
			}
			errs := make(chan error, k)
			for range k {
				go func() {
					_, err := b.directRun(final)
					errs <- err
				}()
			}
			var first error
			for range k {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			return first
		})
	}
	plain := func(k int) (time.Duration, int64, error) { return plainOf(k, false) }
	type series struct {
		d    []time.Duration
		peak int64
	}
	// pi's own cost of loading an extension, any extension: the floor of
	// what loading this one can cost.
	noop := mustAbs("e2e/testdata/extensions/noop.ts")
	// The npm peer, side by side: one task through its subagent tool, four
	// through its workflowScript with runs.all.
	var pr *peer
	peerErr := errors.New("not asked for (-only start)")
	if !startOnly {
		pr, peerErr = b.installPeer()
	}
	peerOne := "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{"agent": "peer", "task": "[[script:bench]] Say done.", "async": false}), textStep("done")) + "]] Delegate."
	var runsAll []string
	for i := range 4 {
		runsAll = append(runsAll, fmt.Sprintf("{key: 't%d', agent: 'peer', task: '[[script:bench]] Say done.'}", i))
	}
	peerFour := "[[steps:" + stepsJSON(toolStep("subagent", map[string]any{
		"workflowScript": "const r = await runs.all([" + strings.Join(runsAll, ", ") + "]); return r.map((x) => x.output);", "async": false,
	}), textStep("done")) + "]] Delegate four."
	// Where the time of a warm one-task delegation goes, from its model
	// calls: parent, child, parent again.
	var phases, phasesFinal delegationPhases
	var floor1, floor4, del1, del4, del1Cold, del4Cold, ext0, noop0, bare0, plain0, peer1, peer4 series
	var floor1F, floor4F, del1F, del4F, del1FCold series
	add := func(s *series, d time.Duration, p int64) { s.d = append(s.d, d); s.peak = max(s.peak, p) }
	// The start rows (pi with and without an extension) differ by a few
	// percent, within this machine's noise over one run each per round:
	// they are sampled startReps times per round, one of each in turn, so
	// that the two servers' periodic work and any drift meet them alike.
	// Medians of 60 runs each still moved by 5% between two benches here
	// (an extension that does nothing read 1.00× and 1.14× of no extension);
	// 16 a round, 160 in a whole bench, hold them to about 2%.
	const startReps = 16
	// A kind of run: its series, how to run it once, whether it is one of
	// the start rows.
	type kind struct {
		into  *series
		run   func() (time.Duration, int64, error)
		start bool
	}
	kinds := []kind{
		{&plain0, func() (time.Duration, int64, error) {
			return sampled(func() error { _, err := b.direct(); return err })
		}, true},
		// The same run as a user's pi without this extension: no -e, no
		// --no-extensions; then with an empty extension; then with this one.
		{&bare0, func() (time.Duration, int64, error) {
			d, p, _, err := b.parentPi(svc, "", none)
			return d, p, err
		}, true},
		{&noop0, func() (time.Duration, int64, error) {
			d, p, _, err := b.parentPi(svc, noop, none)
			return d, p, err
		}, true},
		{&ext0, func() (time.Duration, int64, error) { return parent(none) }, true},
		{&floor1, func() (time.Duration, int64, error) { return plain(1) }, false},
		{&del1, func() (time.Duration, int64, error) { return timedOne("bench", svc, one, &phases) }, false},
		{&del1Cold, func() (time.Duration, int64, error) { return checked("bench", cold, one, 1) }, false},
		{&floor4, func() (time.Duration, int64, error) { return plain(4) }, false},
		{&del4, func() (time.Duration, int64, error) { return checked("bench", svc, four, 4) }, false},
		{&del4Cold, func() (time.Duration, int64, error) { return checked("bench", cold, four, 4) }, false},
		{&floor1F, func() (time.Duration, int64, error) { return plainOf(1, true) }, false},
		{&del1F, func() (time.Duration, int64, error) { return timedOne("bench-final", final, oneFinal, &phasesFinal) }, false},
		{&del1FCold, func() (time.Duration, int64, error) { return checked("bench-final", cold, oneFinal, 1) }, false},
		{&floor4F, func() (time.Duration, int64, error) { return plainOf(4, true) }, false},
		{&del4F, func() (time.Duration, int64, error) { return checked("bench-final", final, fourFinal, 4) }, false},
	}
	if peerErr == nil {
		kinds = append(kinds,
			kind{&peer1, func() (time.Duration, int64, error) { return pr.run(b, peerOne) }, false},
			kind{&peer4, func() (time.Duration, int64, error) { return pr.run(b, peerFour) }, false})
	}
	// A round of the start rows: one of each in turn, startReps times; a
	// round of the others: every other kind once. The start rounds come
	// first, all of them: between them a kind of delegation would wait
	// longer than the warm pool keeps an unused child (2 min), and run
	// cold.
	var startOrder, order []kind
	for range startReps {
		for _, k := range kinds {
			if k.start {
				startOrder = append(startOrder, k)
			}
		}
	}
	for _, k := range kinds {
		if !k.start && !startOnly {
			order = append(order, k)
		}
	}
	// Round after round, so that every kind meets the same machine; the
	// first round warms up.
	for _, kinds := range [][]kind{startOrder, order} {
		for i := range n + 1 {
			for _, k := range kinds {
				// The warm pool refills after a delegation: measured runs do
				// not share the machine with its starts.
				svc.quiet()
				final.quiet()
				d, p, err := k.run()
				if err != nil {
					return "", err
				}
				if i > 0 {
					add(k.into, d, p)
				}
			}
		}
	}
	var r strings.Builder
	r.WriteString("\n## From inside pi\n\n")
	fmt.Fprintf(&r, "A real parent pi (`--mode json -e ./extension`, scripted model) delegating through the extension, against the floor of the same pi runs without Temporal, in turn, %d times each after a warm-up (the four start rows %d times each: %d runs per round, one of each in turn). ", n, n*startReps, startReps)
	r.WriteString("The floor of one task is two plain runs in sequence (parent, child); of four, one plain run followed by four started together. ")
	r.WriteString("The service is a `subagents dev` process (as the extension starts it), reached on its socket. ")
	r.WriteString("Peak memory is the sum of the resident sets of every process of the run but the service (parent pi, what it started, child pi), sampled every 10 ms.\n\n")
	r.WriteString("| run | p50 | p99 | ratio p50 | target | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row := func(name string, s series, floor series, target string) {
		ratio := float64(pct(s.d, 0.5)) / float64(pct(floor.d, 0.5))
		fmt.Fprintf(&r, "| %s | %s | %s | %.2f× | %s | %d MiB |\n", name, ms(pct(s.d, 0.5)), ms(pct(s.d, 0.99)), ratio, target, s.peak>>20)
	}
	row("plain pi, one answer (`--no-extensions`, as a child runs)", plain0, plain0, "")
	row("pi as a user starts it, one answer (no `-e`)", bare0, bare0, "")
	row("the same with an extension that does nothing (pi's cost of loading one)", noop0, bare0, "")
	row("the same with this extension, no delegation", ext0, bare0, "≤ 1.05×")
	// Against the empty extension: what this one costs beyond pi's own
	// price for loading any (its TypeScript loader, jiti).
	row("this extension against the one that does nothing (its own cost)", ext0, noop0, "")
	if startOnly {
		return r.String(), nil
	}
	row("floor: parent + child", floor1, floor1, "")
	row("parent pi, `subagent` tool, 1 task, pool off (`--warm-pool 0`: early start)", del1Cold, floor1, "")
	row("parent pi, `subagent` tool, 1 task, warm pool", del1, floor1, "≤ 0.8×")
	row("floor: parent, then 4 children at once", floor4, floor4, "")
	row("parent pi, `delegate_to_subagents`, 4 tasks, pool off (`--warm-pool 0`: early start)", del4Cold, floor4, "")
	row("parent pi, `delegate_to_subagents`, 4 tasks, warm pool", del4, floor4, "≤ 1.0×")
	if peerErr == nil {
		row("npm peer "+peerVersion+", `subagent` tool, 1 task (children in the parent's process, not durable)", peer1, floor1, "")
		row("npm peer "+peerVersion+", `workflowScript` with `runs.all`, 4 tasks", peer4, floor4, "")
	} else {
		fmt.Fprintf(&r, "\nThe npm peer %s was not measured: %v\n", peerVersion, peerErr)
	}
	r.WriteString("\nThe finalize workload: the same runs, each child calling `subagent_finalize` (the `bench-final` profile: finalize on, as every profile's child runs by default, same tools and body); the floor's plain child loads the same finalize extension (`--extension`, its tool allowed) and answers with the same call, which ends its run. Its warm delegations go to a `subagents dev` of their own, as the rows above (pool of 4): one pool shared by both kinds would give each kind's first delegation of a round the other's children.\n\n")
	r.WriteString("| run (finalize workload) | p50 | p99 | ratio p50 | target | peak RSS of the processes |\n| --- | --- | --- | --- | --- | --- |\n")
	row("floor: parent + child (the child with the finalize extension)", floor1F, floor1F, "")
	row("parent pi, `subagent` tool, 1 task, pool off (`--warm-pool 0`: early start)", del1FCold, floor1F, "")
	row("parent pi, `subagent` tool, 1 task, warm pool", del1F, floor1F, "≤ 0.7×")
	row("floor: parent, then 4 children at once (each with the finalize extension)", floor4F, floor4F, "")
	row("parent pi, `delegate_to_subagents`, 4 tasks, warm pool", del4F, floor4F, "≤ 0.6×")
	r.WriteString(phases.report())
	if s := phasesFinal.report(); s != "" {
		r.WriteString(strings.Replace(s, "Where a warm one-task delegation's time goes", "On the finalize workload, where a warm one-task delegation's time goes", 1))
	}
	fmt.Fprintf(&r, "\nProcesses a parent pi started itself during its delegations (pi and the service excluded), peak: %d MiB (target ≤ 15 MiB; `subagents serve` was 117 MiB). ", own>>20)
	fmt.Fprintf(&r, "The service (`subagents dev`: embedded server, UI, worker) after the runs: %d MiB resident, and its warm children (pool of 4) %d MiB together; the same service with `--warm-pool 0`: %d MiB.\n",
		activities.ResidentBytes(svc.cmd.Process.Pid)>>20, readProcs().below(svc.cmd.Process.Pid)>>20, activities.ResidentBytes(cold.cmd.Process.Pid)>>20)
	return r.String(), nil
}

// childrenAnswered checks that a delegating run reached its children of
// script: n more model calls of theirs than before (a refused delegation
// still lets the parent end, and would be timed as if it had run).
func (b *bench) childrenAnswered(script string, before, n int) error {
	if got := len(b.model.RequestsFor(script)) - before; got != n {
		return fmt.Errorf("the delegation reached %d child model calls, want %d", got, n)
	}
	return nil
}

func (p *delegationPhases) add(t0 time.Time, total time.Duration, reqs []scriptedmodel.Request) {
	if len(reqs) != 3 || t0.IsZero() {
		return
	}
	p.start = append(p.start, reqs[0].Time.Sub(t0))
	p.handOff = append(p.handOff, reqs[1].Time.Sub(reqs[0].Time))
	p.answer = append(p.answer, reqs[2].Time.Sub(reqs[1].Time))
	p.end = append(p.end, t0.Add(total).Sub(reqs[2].Time))
}

func (p *delegationPhases) report() string {
	if len(p.start) == 0 {
		return ""
	}
	return fmt.Sprintf("\nWhere a warm one-task delegation's time goes (medians, from the model calls): the parent's start to its first model call %s; "+
		"that call to the child's model call (the tool call, the service, the warm child's switch to its session and prompt) %s; "+
		"the child's call to the parent's next one (the child's answer, its finalize, back to the parent's tool result) %s; "+
		"the parent's last call to its exit %s. A pi that made a second model call, as a parent does, would wait at exit for V8's background tier-up "+
		"of the HTTP parser's WebAssembly (undici's llhttp), 70-100 ms here; the extension sets `--liftoff-only` in a print or JSON pi (docs/design.md \"Warm children\"), "+
		"which the floor's plain runs, one model call each, do not need.\n",
		ms(pct(p.start, 0.5)), ms(pct(p.handOff, 0.5)), ms(pct(p.answer, 0.5)), ms(pct(p.end, 0.5)))
}
