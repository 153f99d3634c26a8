package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/client"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/pgcluster"
	"github.com/durable-pi/subagents/worker"
)

// levers records what was changed to get these figures and what each change
// bought, measured with this command (`-only` sections) while changing the
// code.
const levers = `
## Levers tried

Measured with this command on this machine while changing the code (` + "`-only serial`" + ` is 40 one-task stub delegations in a row, ` + "`-only load`" + ` the throughput table).

| change | before | after |
| --- | --- | --- |
| wait by polling the status query → wait in the workflows' ` + "`wait`" + ` update (2026-11-22, -n 10) | client library +875 ms | +128 ms |
| the update's answer is the result (no status call after it) | +128 ms | +107 ms |
| the dev server's history transfer queue reads new tasks up to 1,000 times a second instead of 20 per shard (every hop between a workflow and its tasks waited up to 50 ms) | 40 serial stub tasks 13.4 s; 3.0 tasks/s at concurrency 1, 12.7 at 64 | 2.9 s; 13.3 and 13.6 tasks/s |
| workflow code version 2: the starter sets the search attributes, one upsert per change, no signal from a session that completes, profiles resolved in a local activity | session 21 events, delegation 27 | session 12 (17 while it waits for a send), delegation 21; serial and load within noise |
| SQLite: 8 connections with WAL instead of the plugin's one | 12.7 tasks/s at 64 | 6.2 tasks/s (writers wait in SQLite's busy handler): not kept |
| search attribute cache not refreshed on every read | | no change beyond noise: not kept |
| 8 workflow and activity task pollers instead of 2 | | no change beyond noise: not kept |
| the extension acknowledges delivered results beside the next model call instead of before it | | one ` + "`subagents`" + ` process fewer on the parent's path |
| the extension sends its calls to one ` + "`subagents serve`" + ` per parent pi instead of starting the command for each (-only pi, then make bench) | from inside pi: 1 task 1.49×, 4 tasks 1.45× | 1.37×, 1.16× |
| [local service] the extension reaches ` + "`subagents dev`" + ` on its socket (no process per parent), loads compiled to one JavaScript file, and asks nothing at pi's start (-only pi, 2026-11-23) | pi start with the extension 1.09× | 1.02–1.06× (an empty extension: 1.01–1.07×) |
| [warm children] a warm pool of child pi processes in RPC mode, one task each (-only overhead, -only pi, 2026-11-23) | ` + "`subagents run`" + ` 1.24×; from inside pi 1 task 1.29×, 4 tasks 1.23× | 0.52×; 0.93×, 0.87× |
| a warm child's key one above its kind's peak (back-to-back tasks of one kind find a child while the last one taken is replaced) | ` + "`subagents run`" + ` right after another task 1.79× (a miss) | 0.63×, then 0.52× once each run starts after the refill |
| [local service] the primary profiles' tools from the remembered listing are registered while pi loads the extension, not after the session started (each one registered later made pi rebuild its tool registry and system prompt) (by hand, 30 rounds side by side, 2026-11-24) | pi start with the extension 1.10× (an empty extension 1.04×) | 1.07×; in this ` + "`make bench`" + ` 1.00× (an empty extension 0.98×) |
| [warm children] a print or JSON pi with the extension compiles WebAssembly at V8's baseline tier, so that it does not wait at exit for the optimizing tier of undici's llhttp (by hand, 12 rounds side by side, 2026-11-24) | one-task delegation from inside pi 710 ms; its last model call to exit 124 ms | 593 ms; 55 ms (from inside pi, warm: 1.01× in -only pi, then 0.96× in make bench) |
| [warm children] a child run's result is returned when pi says its agent settled, not when pi has exited (the process exits in the background, holding its session until then) (-only overhead, 2026-11-24) | ` + "`subagents run`" + ` warm 0.54×, pool off 1.31× (make bench) | 0.49×, 1.29× |
| [warm children] a warm child starts on a session file of its own and a first turn takes it as it is (the task's session file links to it until the child exited), instead of ` + "`switch_session`" + `, which rebuilds pi's runtime: 27–52 ms measured in the pooled tests (-only overhead, 2026-11-24) | client library warm 0.43×, ` + "`subagents run`" + ` warm 0.49× | 0.35×, 0.46× |
| [warm children] the pool refills 200 ms after a run instead of at once (a pi start beside the run's result made the session's and delegation's workflow tasks after the activity a third slower: 41 ms against 26 ms from the activity's end to the update's answer, read from the histories) (-only pi, 2026-11-24) | from inside pi, 1 task warm 0.96× (make bench); tool call to tool result 105–130 ms by hand | 0.70×, 0.55× for 4 tasks; 100–120 ms |
| [local service] the session's start-up work (the primary profiles' listing, the look for earlier results) runs beside pi's start instead of before its first prompt; a delegation and a print run's settle wait for it (in-process timing, 2026-11-24) | pi waited in the extension's session_start 2 ms with the service running, 4–10 ms without | none awaited (its synchronous part, about 1.5 ms, remains) |
| measured, not a change: the extension loaded with its tools left unregistered, and the compiled file imported without activating it (by hand, 40 rounds side by side, wall and CPU time of the process, 2026-11-24) | this extension: +18–22 ms wall, +17–22 ms CPU over an empty one | tools unregistered: 9 ms wall and 13 ms CPU less; import alone: as an empty extension. The rest is pi's handling of the tools' definitions |
| measured, not a change: a JSON pi with the extension without ` + "`--liftoff-only`" + ` (same rounds) | | no faster (a one-answer run has one model call) |
| [warm children] early start: a task that finds no warm child takes one the worker started for it as it resolved the delegation, beside the session's start, instead of starting pi when its run begins (-only overhead, 20 rounds, 2026-11-24, on a machine where pi alone took 648 ms) | pool off: client library 1.13×, ` + "`subagents run`" + ` 1.31× | 1.06×, 1.24× (45 and 41 ms less) |
| visibility in a SQLite file of its own (its own connection, so that the visibility queue's writes do not wait for the history writer's) (a stub load of 256 tasks at concurrency 16, three times each, in turn, 2026-11-24) | 21.7–26.0 tasks/s | 23.6–25.8 tasks/s: within noise, not kept |
| [warm children] ` + "`subagents run`" + ` beside the local service hands its call to the service's socket instead of dialing its frontend: the service's client starts the workflow eagerly on its own worker (-only overhead, 12 rounds, 2026-11-25) | ` + "`subagents run`" + ` beside ` + "`subagents dev --warm-pool 0`" + ` 1.28× | 1.04× (0.98× in this ` + "`make bench`" + `, against 1.21× dialing the same service) |
| 4 history shards on the embedded server instead of 1 (-only load without the cluster, 2026-11-25) | 23.0 tasks/s at concurrency 16, 23.5 at 64 | 23.9, 21.2: within noise, not kept |
| the embedded server's visibility table without the indexes of the attributes nobody here queries (40 of its 58: history length and size, the pre-allocated Bool, Datetime, Double and Int columns, the scheduler's, deployments' and CHASM's) (-only load without the cluster, twice each, in turn, 2026-11-25) | 25.1 and 24.5 tasks/s at concurrency 16 | 21.0 and 22.7: not kept (the visibility writes, 14% of the process's CPU, are not what bounds it) |
| measured, not a change: the ceiling of one workflow per one-task delegation (` + "`-only solo`" + ` as it was then: the same stub task as a session workflow started directly with the input its delegation gave it, no delegation workflow; 3 rounds in turn, 2026-11-25) | one-task delegations: 19.1–19.9 tasks/s at concurrency 1, 22.3–24.9 at 16 | session alone: 31.6–38.3 and 48.9–49.5 tasks/s (1.6–2.2×): above the ≥ 40 target, so this is the lever for it |
| [warm children] workflow code version 3: a delegation of one new task is one workflow, its session, which resolves the profile, keeps its first turn as the delegation's task and waits for the parent's ack (` + "`-only load,solo`" + `, 3 rounds in turn against the version 2 form, 2026-11-25) | version 2: 15.0–16.7 tasks/s at concurrency 1, 15.8–20.8 at 16 | 31.5–34.1 and 40.7–54.2 tasks/s (2.0–2.6×); the throughput table 45.8 at 16 in the same run |
| measured, not a change: what a pi start pays for this extension, by part (by hand, 60 rounds side by side, time to pi's agent_settled event, 2026-11-25) | an empty extension: +8 ms over it | its four tool families turned off (` + "`\"tools\"`" + ` settings): +1 ms. The rest is pi's handling of the seven tools' definitions (system prompt, session entries, the JSON events and the model request carry them) |
| [operator truth] workflow code version 5: a session's run closes with its turn (Completed, Failed, Canceled) and a send reopens it (` + "`-only load -n 3 -idle 10`" + ` of this command built at f3bd424, before, and at 4fe77c4, after, each in its own worktree, in turn, 6 rounds each, 2026-11-28 09:42–10:23 UTC; the machine busy with others' work (load average 5–14), so 1.5–3× below the throughput table's rates; 4fe77c4's cluster rows in rounds 4–6 only, with its ` + "`subagents setup`" + ` probe fixed (it refused SubagentSendUntil = 'setup-probe')) | embedded: 8.5, 13.9 and 10.5 tasks/s at concurrency 1, 16 and 64 (medians); cluster: 11.8, 18.0, 14.9 | embedded: 10.2, 12.2, 12.4 (the rounds' after/before ratios, median: 1.07×, 1.05×, 1.00×); cluster: 11.6, 17.0, 15.8 (0.98×, 0.94×, 1.10×): within noise (single rounds' ratios 0.46–2.22×), as expected: a one-task delegation with no idle TTL completed after its turn in both |
| [operator truth] the same change, idle sticky sessions (` + "`-only idle -idle 2000`" + `, both models in one run, 2026-11-28 10:04 UTC, same busy machine) | version 4: 2,000 idle sessions all Running, one timer each, 32.6 KB of worker memory each (1,000 of them cached); a ` + "`send`" + ` through the client library 16 ms to return, 158 ms to its turn's end | version 5: none Running, no timer, 0.4 KB each (none cached), 0.90× the database bytes; the ` + "`send`" + ` reopens the session: 37 ms, 181 ms (1.15×); starting them 0.86× the sessions/s, not traced (each first turn's run also closes, and a wait that comes after the close reads the session's status instead of the update's answer) |
| [speed] the sanitizer runs a rule only over text that holds one of the rule's literals, and masks values only at names that hold a secret word (` + "`go test ./activities -bench BenchmarkSanitize`" + `, and the CI's ` + "`-race`" + ` run, 2026-11-28) | a megabyte of output without a secret: about 2.9 s to sanitize (25 regexps at about 10 MB/s); the activity package under ` + "`-race`" + ` 1,049 s | 7–10 ms (150 ms for prose full of key, path, token); 164–168 s |
| [speed] the end-to-end tests three at a time (` + "`t.Parallel`" + ` in 163 of 172, ` + "`-parallel 3`" + `; pi looked up once per test binary; one warm child per kind in the tests' workers) (` + "`.ci/run`" + ` on a fresh clone, 2026-11-28) | e2e 1,372 s; ` + "`make test`" + ` 43 min 11 s (with the sanitizer's 886 s) | 790 and 899 s; 18 min 19 s and 19 min 40 s |
| [speed] pi's start: the questions look asked as pi loads the extension instead of awaited before the first prompt; the first prompt waits only for a primary-profile listing under way (traced event by event against an empty extension, then ` + "`-only pi`" + `, 2026-11-28) | the first prompt waited 10–18 ms for the socket; pi start with the extension 1.14× (an empty extension 1.04×) | none; 1.09× (1.02×) |
| the child environment's secret rules remembered per value (` + "`envSecretValue`" + `) instead of run for every child (2026-11-28, profile of ` + "`-only load`" + `) | 3.5% of a stub delegation's CPU | gone from the profile |
| the search attribute cache reads through only until the attributes registered at start settled (5 s), not on every lookup (2026-11-28) | 4.4% of a stub delegation's CPU, each a read on the one SQLite connection | gone from the profile; 22.7 tasks/s at 16 against 17–18 for the same bench before it the same afternoon (noisy) |
| a warm child's replacement starts as a task takes it, not 200 ms after the run ends (2026-11-28) | a lane's reviewer found no warm child | ` + "`TestRefillStartsAsAChildIsTaken`" + `; the plans section not measured again |
| [speed] no gzip on a loopback connection to Temporal (` + "`connection.Uncompressed`" + `, the embedded server's client options): the SDK gzips every request by default, and the server its answers (` + "`-only load`" + ` of c59c344, before, and of 51983a2, after, each in its own worktree, in turn, two rounds each, 2026-11-29 00:00–00:15 UTC, quiet) | 5% of a stub task's CPU in the profile; CPU per task at concurrency 1: 84.8 and 84.0 ms; tasks/s at concurrency 1: 16.0, 16.7, at 16: 22.9, 19.9; cluster CPU per task 128.8, 123.8 ms | 77.5 and 76.2 ms (0.91×); 17.7, 17.5 and 21.6, 22.8; cluster 126.0, 119.0 ms (0.97×): kept |
| [speed] a run that finds no idle warm child waits for the child the pool is already starting for its kind, instead of starting a pi of its own beside it (2026-11-29, ` + "`-only plans -n 5`" + ` in turn with the commit before, two rounds) | the lanes plan with the warm pool 1.26× and 1.29× (9–11 of 12 children warm) | 1.12× and 1.15× (12 of 12 warm, 3 waited for theirs) |
| [speed] the warm pool keeps two waves of a kind's peak (twice the most that ran at once, at least one more) instead of one child more than the peak (2026-11-29, the same, one round) | the lanes plan with the warm pool 1.21× | 0.75× (none waited); 0.73× in an earlier run |
| the warm pool's refill held back 800 ms after the take, or its children started at ` + "`nice 10`" + ` (2026-11-29, a traced one-task finalize delegation from pi, 8 runs each, in turn) | the parent's first model call to its exit 350–380 ms | about 305 ms held back, about 325 ms at ` + "`nice 10`" + `: not kept, the lanes plan needs the refill at the take, and a worker that is not root cannot lower a nice value again, so the child a task takes would run its whole task at low priority |
| [speed] the warm pool's refills start one pi at a time (half the machine's cores), not all at once (2026-11-29, ` + "`-only pi -n 6`" + ` of d785f54, after, and of the commit before it, each in its own worktree, two rounds in turn: before, after, after, before) | the parent's four-task finalize delegation, warm: 2413 and 2709 ms (0.74× and 0.80× of their floors); with the ` + "`bench`" + ` children 2169 and 2230 ms | 2268 and 2281 ms (0.54× and 0.56×, but those runs' floors of four children ran 10–25% slower, the whole machine 6–10%); 2191 and 2228 ms: kept, about a tenth off the finalize row, the others within noise |
| [speed] the open-session records (` + "`" + `<data dir>/open/` + "`" + `, one per top-level pi, kept 31 days) swept once a day, not read whole at every session's start and end (2026-11-29, 8f9ccba; ` + "`" + `-only start -n 6` + "`" + `, 96 runs a row, this commit's extension and the one before it in turn: new, old, new) | pi with this extension 1.15× and 1.12× of plain pi (1.09× and 1.05× of an empty extension); a CPU profile of pi's start after 194 earlier runs: 7.5 ms reading the records at the start, 3 ms more at the end | 1.05× and 1.11× (1.00× and 1.04×); 0.7 ms in the same profile: kept. The bench's fresh data dir holds at most a hundred records, so most of that spread is this machine's; a user's folder of a month of pi runs holds thousands |
| [speed] a take that leaves its kind an idle child holds its replacement back a second (` + "`" + `heldRefill` + "`" + `; a run that ends sooner starts it 200 ms after its end), instead of starting it at the take (2026-11-29, ` + "`" + `-only pi -n 6` + "`" + ` of fad5a7e and 17cd2b7, after, and of 25316d7, before, each in its own worktree, four runs in turn: after, before, before, after) | finalize workload, one task warm: 0.76× and 0.83× of its floor (669 and 947 ms); the parent's tool call to the child's model call 112 and 227 ms, the child's call to the parent's next one 74 and 101 ms | 0.68× and 0.68× (602 and 925 ms); 96 and 150 ms, 55 and 93 ms: kept. Four tasks unchanged (0.55× and 0.65× against 0.56× and 0.66×: a wave's last take leaves no idle child and refills at once); the lanes plan 0.73×, 0.55× on the finalize workload (12 of 12 children warm). It exposed a livelock: two kinds whose keeps passed the pool's size, refilled at once, ended each other's children in turn (` + "`" + `TestWarmPool` + "`" + `, 41–68 evictions in 30 s); since 17cd2b7 only the kind used last ends another's |
| [speed] ` + "`" + `make test` + "`" + `'s race run of the workflow and activity packages beside every other package (` + "`" + `make -j2 test-go-race test-go-rest` + "`" + `) instead of before them (2026-11-29, a fresh-clone CI of each) | 14 min 21 s and 14 min 22 s (the race run 137–146 s alone, the end-to-end package 569–641 s) | 14 min 8 s (the race run 232 s beside the end-to-end package, which took 720 s): within noise, not kept: the two cores were already full |
| [speed] ` + "`" + `make test` + "`" + `: ` + "`" + `TestCluster` + "`" + ` in a ` + "`" + `go test` + "`" + ` of its own beside the ` + "`" + `-race` + "`" + ` run of the workflow and activity packages, not among the end-to-end tests (where it started last and ran alone for its last minute); the activities tests that mostly wait beside each other (` + "`" + `waitsMostly` + "`" + `); the services the end-to-end tests start keep one warm child per kind (` + "`" + `SUBAGENTS_WARM_POOL=1` + "`" + `); ` + "`" + `TestContractsOutputMaxCharsKnob` + "`" + ` no longer alone (2026-11-29, fresh-clone CIs of 2ca5975, before, and of 87b55f0 and 208a300, after) | 14 min 21 s to 16 min 9 s in that day's five CIs that passed (the ` + "`" + `-race` + "`" + ` run 137–149 s, then the end-to-end package 569–686 s) | 10 min 56 s and, with 208a300, 10 min 34 s (the ` + "`" + `-race` + "`" + ` run 108 and 106 s with ` + "`" + `TestCluster` + "`" + ` beside it, 91 and 87 s; the end-to-end package 471 and 463 s); 12 min 37 s and 12 min 38 s in two CIs an hour later, when the machine ran the same processes with 23% more CPU |
| [speed] ` + "`" + `make test` + "`" + `: the ` + "`" + `-race` + "`" + ` run and ` + "`" + `TestCluster` + "`" + ` in the background beside every other package and test, not before them; ` + "`" + `TestScheduleCatchesUpAfterTheServiceWasDown` + "`" + ` beside the other tests (every 8 s and 40 s down, not every 4 s and alone); each release's npm packages packed once per test binary; a warm pool only in the tests whose workers take from it (` + "`" + `keepWarm` + "`" + `); Go's linters beside npm ci (2026-11-29, fresh-clone CIs in turn: aff90f6, before; b931206 and 6294a72, after; aff90f6 again; 6294a72 again and 04d7b33) | 13 min 28 s and 12 min 55 s (the ` + "`" + `-race` + "`" + ` run 132 and 135 s alone with ` + "`" + `TestCluster` + "`" + `, then the end-to-end package 587 and 552 s; 1,245 CPU seconds, 980 pi processes) | 11 min 15 s, 11 min 26 s, 11 min 45 s and 11 min 3 s (the ` + "`" + `-race` + "`" + ` run 196–223 s beside the end-to-end package's 562–589 s; 1,156–1,195 CPU seconds, 881–884 pi processes but for b931206's 952). The ` + "`" + `-race` + "`" + ` run beside the rest gained nothing at 25316d7 (a row above): then ` + "`" + `TestCluster` + "`" + ` ran last among the end-to-end tests and the schedule test alone, and the cores were full |
| [speed] the reaper lists a process's children from the kernel's lists of each thread's children (` + "`" + `/proc/PID/task/TID/children` + "`" + `) instead of reading every process's stat in /proc, three times a run (one-task stub delegations at concurrency 16, 512 a run after 64 to warm up, the reaper's CPU read from its /proc stat; two rounds each, in turn, 2026-11-29 21:40 UTC) | the reaper 9.0–9.7 ms of CPU per task; the machine 57.2–59.1 ms per task, 26.5–27.6 tasks/s | 1.9 ms; 50.5–51.8 ms (0.88×), 29.5–30.3 tasks/s (1.10×): kept. In the next ` + "`" + `-only load` + "`" + ` the embedded server's delegations ran at 0.86× of the engine's one-activity floor, against 0.67× and 0.72× in the two runs before the change (the floor's first form, its kinds in the same order each round: [The engine's floor](#the-engines-floor)) |
| the replacement of a child taken while other runs of its kind go on (a wave that leaves the kind no idle child) held back a second too, as a take that leaves one is (` + "`" + `-only pi` + "`" + `, its finalize rows alone, three rounds of A B B A, each in its own worktree, 2026-11-29 20:58–21:31 UTC) | four tasks from pi 0.56–0.68× of the floor (median 0.63×) | 0.52–0.68× (median 0.585×): within this machine's spread, and target 4 wants a refill to start as a child is taken: not kept |
| [speed] ` + "`" + `make test` + "`" + `: its ` + "`" + `go test` + "`" + ` runs link without DWARF (` + "`" + `-ldflags=-w` + "`" + `; the linters' builds and ` + "`" + `make build` + "`" + ` keep it); no ` + "`" + `npm publish --dry-run` + "`" + ` of each packed release, which a registry publish follows; the bench's one test, of its install section's splice, in a package of its own (` + "`" + `internal/benchpage` + "`" + `) whose test binary does not hold the Temporal server (2026-11-29, fresh-clone CIs with process accounting) | the linker 125–152 CPU seconds, npm's publishes 41.5; all but pi and the compiler 564–624 (three CIs of 21:59–22:52 UTC); 12 min 44 s and 12 min 47 s at the hours when pi took 0.770–0.797 s of CPU per process | the linker 101.5, npm's publishes 26.5, all but pi and the compiler 542; 11 min 52 s with pi at 0.789 s of CPU per process (23:45–23:57 UTC, every test passed) |

Where the rest goes. One stub task through the client library takes about 30 ms from start to result:
one workflow, a few hops of 2 to 8 ms through the server, a child process start. Read from the
histories of a warm one-task delegation from inside pi before version 3 (tool call at 0 ms): the delegation started at 4
ms (the extension, the socket, an eager start), its first workflow task resolved the profile in a local
activity and started the session (10 ms), the session's first workflow task scheduled the activity
(27 ms, eager dispatch), the warm child ran (45 ms), and the session's and delegation's workflow tasks
after it (a signal between them) answered the parent's wait update at 98 ms. Version 3 runs a one-task
delegation as its session alone: the session's first workflow task resolves the profile and schedules
the run, and its workflow task after the run answers the wait, with no child workflow start, no signal
and no second workflow's events or visibility records. Under load, throughput was bound by the CPU each
task costs, not by a wait (2026-11-24, ` + "`-only load`" + ` and a load of 3 × 256
one-task delegations at concurrency 16 by hand, version 2): at concurrency 16 the machine is about 72% busy
(vmstat: close to what two cores give with the kernel's and Go's scheduling) and the bench's process (embedded server, worker, client) uses about one core, some 60 ms
of CPU per stub task; goroutine dumps under that load show no call waiting for the database
connection or a lock, and an fsync here takes 175 µs. Of that process's CPU profile (the shares overlap: SQLite's is
inside the others), the visibility queue takes 24% (a REPLACE or INSERT on an indexed table for each workflow start, close and status
change while running: the close alone 9%), SQLite 29% (of which compiling statements, which the
SQLite plugin prepares anew for every call, 12 points, and the commits' writes and fsyncs 12), the
gRPC handling between client, worker and server 24%, workflow task completions 11%. Halving the
workflows per task halved that work: version 3 runs about twice the tasks per second of version 2
side by side (` + "`-only solo`" + `, the levers table). With the pool off, early
start takes those hops off the child's path (its pi starts while they go on), which leaves the
library client within a few percent of pi alone. ` + "`subagents run`" + ` beside a ` + "`subagents dev`" + ` service hands its
call to the service's socket (the rows above): the service's client starts the workflow eagerly on
its own worker, and the command's process makes no connection of its own; dialing the same
service's frontend instead costs the SDK client's start and the hops eager start saves. What the
command still pays is its own process (a Go program linking the SDK's client: 19 ms and 26 MiB for
a ` + "`status`" + `, the local service's table).

With the warm pool the child's start is off the path: a warm child whose session is new takes its
task at once (its own slot, no ` + "`switch_session`" + `), answers the one-turn prompt in about 40 ms, and its
result goes back as soon as pi says the agent settled. Eager workflow start applies only where the client shares the worker's process (the
socket of ` + "`subagents dev`" + `, as the extension and ` + "`subagents run`" + ` beside it reach it); this bench's library
client and the ` + "`subagents run`" + ` rows against its in-process worker dial the server themselves.
`

// inFlight runs job(0..total-1) with at most limit at a time and returns
// the wall time of all of them and the first error.
func inFlight(total, limit int, job func(i int) error) (time.Duration, error) {
	start := time.Now()
	sem := make(chan struct{}, limit)
	errs := make(chan error, total)
	for i := range total {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- job(i)
		}()
	}
	for range limit {
		sem <- struct{}{}
	}
	wall := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return wall, err
		}
	}
	return wall, nil
}

// stubTasks runs one delegation of k stub tasks, all at once, on the
// embedded server, and returns its wall time from start to done.
func (b *bench) stubTasks(k int) (time.Duration, error) { return b.stubTasksOn(b.stub, k) }

// stubRequest is a delegation of k stub tasks, all at once, whose sessions
// complete after their turn.
func (b *bench) stubRequest(k int) client.StartRequest {
	req := client.StartRequest{MaxConcurrency: k, IdleTTLSeconds: -1}
	for i := range k {
		req.Tasks = append(req.Tasks, api.TaskSpec{Name: fmt.Sprintf("t%d", i), Prompt: "stub", Cwd: b.workDir})
	}
	return req
}

// stubTasksOn is stubTasks through c.
func (b *bench) stubTasksOn(c *client.Client, k int) (time.Duration, error) {
	start := time.Now()
	env, err := c.Start(b.ctx, b.stubRequest(k))
	if err != nil {
		return 0, err
	}
	done, err := c.Wait(b.ctx, env.DelegationID, time.Minute)
	if err != nil {
		return 0, err
	}
	if !done.Done || done.Status != "completed" {
		return 0, fmt.Errorf("stub delegation: %+v", done)
	}
	return time.Since(start), nil
}

// load measures fan-out and throughput with the stub child.
func (b *bench) load() (string, error) {
	var r strings.Builder
	const reps = 5
	// In blocks, not alternating: the server is still writing the
	// visibility records of a 16-task run for a few hundred milliseconds,
	// which a 1-task run right after it would pay for.
	block := func(k int) ([]time.Duration, error) {
		var out []time.Duration
		for i := range reps + 1 {
			d, err := b.stubTasks(k)
			if err != nil {
				return nil, err
			}
			if i > 0 { // the first run warms up
				out = append(out, d)
			}
		}
		time.Sleep(2 * time.Second)
		return out, nil
	}
	one, err := block(1)
	if err != nil {
		return "", err
	}
	sixteen, err := block(16)
	if err != nil {
		return "", err
	}
	r.WriteString("\n## Fan-out (stub child)\n\n")
	fmt.Fprintf(&r, "A delegation of 16 tasks at concurrency 16 against one of 1 task, %d times each, the stub child (`internal/stubpi`) answering at once: ", reps)
	fmt.Fprintf(&r, "1 task p50 %s, 16 tasks p50 %s, ratio %.2f×.\n", ms(pct(one, 0.5)), ms(pct(sixteen, 0.5)), float64(pct(sixteen, 0.5))/float64(pct(one, 0.5)))

	// The same work on a Temporal cluster on PostgreSQL (docs/cluster.md, "A
	// cluster on PostgreSQL"), side by side: each concurrency on one
	// server, then on the other.
	cluster, stopClusterNow, clusterErr := b.stubCluster()
	var stopOnce sync.Once
	stopCluster := func() { stopOnce.Do(stopClusterNow) }
	defer stopCluster()
	r.WriteString("\n## Throughput (stub child)\n\nOne-task delegations kept in flight at each concurrency until the count is done, ")
	r.WriteString("on the embedded server (`subagents dev`: SQLite, WAL, synchronous FULL) and, in turn, on a Temporal cluster on PostgreSQL ")
	r.WriteString("(`internal/pgcluster`: Debian's PostgreSQL 15 with its defaults, fsync on; the four services as processes of their own, 4 history shards, the server built from the module; one in-process worker, as for the embedded server). Same machine, same worker code.\n\n")
	r.WriteString("The CPU columns are the whole machine's (`/proc/stat`: every process but idle time, this bench's, the stub children's and the reaper's, and the cluster's processes) over the run, per task and as cores busy of the machine's " + strconv.Itoa(runtime.NumCPU()) + ": a run that keeps fewer cores busy than the machine has waits on something other than CPU.\n\n")
	r.WriteString("| concurrency | tasks | embedded: wall | embedded: tasks/s | embedded: CPU per task, cores busy | cluster: wall | cluster: tasks/s | cluster: CPU per task, cores busy | target |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range []int{1, 16, 64} {
		total := max(4*c, 40)
		busy := machineBusy()
		wall, err := inFlight(total, c, func(int) error { _, err := b.stubTasks(1); return err })
		if err != nil {
			return "", err
		}
		cpu := cpuPerTask(machineBusy()-busy, wall, total)
		cwall, crate, ccpu := "-", "-", "-"
		if clusterErr == nil {
			busy := machineBusy()
			cw, err := inFlight(total, c, func(int) error { _, err := b.stubTasksOn(cluster, 1); return err })
			if err != nil {
				return "", err
			}
			cwall, crate, ccpu = ms(cw), fmt.Sprintf("%.1f", float64(total)/cw.Seconds()), cpuPerTask(machineBusy()-busy, cw, total)
		}
		target := ""
		if c == 16 {
			target = "embedded ≥ 100 tasks/s, cluster ≥ 60"
		}
		fmt.Fprintf(&r, "| %d | %d | %s | %.1f | %s | %s | %s | %s | %s |\n", c, total, ms(wall), float64(total)/wall.Seconds(), cpu, cwall, crate, ccpu, target)
	}
	if clusterErr != nil {
		fmt.Fprintf(&r, "\nThe cluster was not measured: %v\n", clusterErr)
	}
	// The engine's floor after the table, so that the table's rows meet the
	// servers as earlier runs of this page did: the cluster's while it
	// runs, then the embedded server's once it has stopped (its idle
	// services would take a share of the machine's CPU).
	var clusterFloor []floorKind
	clusterFloorErr := clusterErr
	if clusterErr == nil {
		clusterFloor, clusterFloorErr = b.engineFloor(cluster.Temporal, func(int) error { _, err := b.stubTasksOn(cluster, 1); return err })
	}
	stopCluster()
	floor, floorErr := b.engineFloor(b.tc, func(int) error { _, err := b.stubTasks(1); return err })
	r.WriteString(floorReport(floor, floorErr, clusterFloor, clusterFloorErr))
	return r.String(), nil
}

// stubCluster starts a Temporal cluster on PostgreSQL, sets up its
// namespace as `subagents setup` does, and runs a stub-child worker on it.
// stop ends all of it (and is safe to call when err is set).
func (b *bench) stubCluster() (c *client.Client, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	dir := filepath.Join(b.root, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, stop, err
	}
	tools, err := pgcluster.Build(b.ctx, ".", filepath.Join(dir, "bin"))
	if err != nil {
		return nil, stop, err
	}
	cl, err := pgcluster.Start(b.ctx, tools, dir)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, cl.Stop)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// As a worker's connection dials it (connection.Settings.Dial).
	copts := sdkclient.Options{HostPort: cl.Address, Logger: sdklog.NewStructuredLogger(quiet)}
	connection.Uncompressed(&copts)
	tc, err := sdkclient.Dial(copts)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, tc.Close)
	if err := worker.Setup(b.ctx, tc, "default", 24*time.Hour, io.Discard); err != nil {
		return nil, stop, err
	}
	w, err := worker.New(tc, worker.Config{TaskQueue: "bench-stub", DataDir: filepath.Join(dir, "data"), Pi: worker.Pi{Path: b.stubPath, Version: "stub"}, Logger: quiet})
	if err != nil {
		return nil, stop, err
	}
	if err := w.Start(); err != nil {
		return nil, stop, err
	}
	stops = append(stops, w.Stop)
	return &client.Client{Temporal: tc, TaskQueue: "bench-stub", Address: cl.Address}, stop, nil
}

// machineBusy is the CPU time every process of this machine has used
// (/proc/stat's first line, all but idle and iowait; guest time is in user
// already): the server, the worker, the stub children under the reaper
// and a cluster's processes alike. Zero where there is no /proc.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	var ticks int64
	// user nice system idle iowait irq softirq steal [guest guest_nice]
	for i, v := range fields[1:min(len(fields), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	// USER_HZ is 100 on every Linux this runs on.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// cpuPerTask is "CPU per task, cores busy" for a run of n tasks that used
// cpu of the machine in wall.
func cpuPerTask(cpu, wall time.Duration, n int) string {
	if cpu == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms, %.2f", float64(cpu.Microseconds())/1000/float64(n), cpu.Seconds()/wall.Seconds())
}
