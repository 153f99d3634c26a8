import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { SubagentsError, type SubagentsCli } from "../src/cli.ts";
import { Delivery, startsTurn, TURN_SENT_TYPE } from "../src/delivery.ts";
import { isThisProcess, readMark, writeMark } from "../src/liveness.ts";

/** A fake command that records what the delivery asks. */
function recorder(answer: (verb: string) => unknown = () => ({ runs: [] })) {
	const calls: Array<{ verb: string; passive: boolean }> = [];
	const cli = (passive = false) =>
		({
			call: async (verb: string) => {
				calls.push({ verb, passive });
				const a = answer(verb);
				if (a instanceof Error) throw a;
				return a;
			},
		}) as unknown as SubagentsCli;
	return { calls, cli };
}

function session(id: string, over: Partial<{ mode: string; cwd: string; file: string; idle: boolean }> = {}): ExtensionContext {
	return {
		sessionManager: { getSessionId: () => id, getBranch: () => [], getSessionFile: () => over.file },
		hasUI: false,
		isIdle: () => over.idle ?? true,
		mode: over.mode ?? "json",
		cwd: over.cwd ?? "/work/project",
	} as unknown as ExtensionContext;
}

const pi = { sendMessage: () => {} } as unknown as ExtensionAPI;

test("a start asks the local service nothing unless its session marked itself waiting", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => dir);
	await d.resume(session("fresh"));
	assert.deepEqual(r.calls, [], "a session that never delegated makes no call at pi's start");

	mkdirSync(join(dir, "pending"), { recursive: true });
	writeFileSync(join(dir, "pending", "waiting"), "");
	// Written by an earlier pi: one this process wrote stays, its delegation may not have started yet.
	utimesSync(join(dir, "pending", "waiting"), new Date(0), new Date(0));
	await d.resume(session("waiting"));
	assert.deepEqual(r.calls, [{ verb: "list", passive: true }], "a marked session asks only a service that runs: its results wait for one");
	assert.equal(existsSync(join(dir, "pending", "waiting")), false, "the mark goes once nothing of the session is open");
});

test("a remote Temporal keeps no marks: every start asks, and starts nothing", async () => {
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => undefined);
	await d.resume(session("any"));
	assert.deepEqual(r.calls, [{ verb: "list", passive: true }]);
});

test("a delegation that cannot mark its session is not started", () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	writeFileSync(join(dir, "pending"), "a file where the marks' folder should be");
	const d = new Delivery(pi, recorder().cli, () => dir);
	assert.throws(
		() => d.delivering(session("s1")),
		(e: unknown) => e instanceof SubagentsError && e.code === "SERVICE_UNAVAILABLE" && /cannot mark/.test(e.message),
	);
});

test("a session shut down while its start-up still asks the service starts nothing after", async () => {
	// The service answers only after pi has shut the session down (a print
	// run that ended while the start-up work waited): nothing is watched,
	// delivered or touched in the ended session, and nothing throws.
	let answer: (v: unknown) => void = () => {};
	const listed = new Promise((resolve) => (answer = resolve));
	const calls: string[] = [];
	const cli = () =>
		({
			call: async (verb: string) => {
				calls.push(verb);
				return verb === "list" ? listed : { done: false, delegation_id: "delegation-1" };
			},
			follow: () => new Promise(() => {}),
		}) as unknown as SubagentsCli;
	const d = new Delivery(pi, cli, () => undefined);
	const stale = {
		...session("ended"),
		get hasUI(): boolean {
			throw new Error("This extension ctx is stale");
		},
	} as unknown as ExtensionContext;
	const resumed = d.resume(stale);
	d.shutdown();
	answer({ runs: [{ id: "delegation-1" }] });
	await resumed;
	assert.deepEqual(calls, ["list"], "no status asked for a session that ended");
	assert.deepEqual(d.running(), [], "nothing watched after the shutdown");
});

test("a delegation this process is starting is not found again as an earlier one", async () => {
	// The start of the service by a delegation's own call runs the look for
	// earlier results; the list may already hold the delegation that call
	// is starting. Its result comes back as that call's tool result: the
	// look must neither watch it nor deliver it a second time.
	let started: (env: unknown) => void = () => {};
	const start = new Promise((resolve) => (started = resolve));
	const calls: string[] = [];
	const cli = () =>
		({
			call: async (verb: string) => {
				calls.push(verb);
				if (verb === "list") return { runs: [{ id: "delegation-new" }, { id: "delegation-old" }] };
				return { done: false };
			},
			follow: () => new Promise(() => {}),
		}) as unknown as SubagentsCli;
	const d = new Delivery(pi, cli, () => undefined);
	const own = d.own(start as Promise<never>);
	const resumed = d.resume(session("s"));
	await new Promise((r) => setTimeout(r, 10));
	assert.deepEqual(calls, ["list"], "the look waits for the start under way before it decides");
	started({ delegation_id: "delegation-new" });
	await own;
	await resumed;
	assert.deepEqual(calls, ["list", "status"], "only the earlier delegation is asked for");
	assert.deepEqual(d.running(), ["delegation-old"], "only the earlier delegation is watched");
	d.shutdown();
});

test("looks for earlier results run one after another, and a status that fails falls back to waiting", async () => {
	let inFlight = 0;
	let most = 0;
	const cli = () =>
		({
			call: async (verb: string) => {
				inFlight++;
				most = Math.max(most, inFlight);
				await new Promise((r) => setTimeout(r, 5));
				inFlight--;
				if (verb === "list") return { runs: [{ id: "delegation-1" }] };
				throw new SubagentsError("SERVICE_UNAVAILABLE", "no poller seen for task queue recently");
			},
			follow: () => new Promise(() => {}),
		}) as unknown as SubagentsCli;
	const d = new Delivery(pi, cli, () => undefined);
	await Promise.all([d.resume(session("s")), d.resume(session("s"))]);
	assert.equal(most, 1, "two looks never ask at the same time");
	assert.deepEqual(d.running(), ["delegation-1"], "the delegation is waited for once, though its status could not be read");
	d.shutdown();
});

test("a result starts a turn of its own only where someone waits for it", () => {
	// The terminal and RPC show every result of the session as it comes; a
	// print run's answer is its last message, so only what its own model
	// started gets a turn; a result taken with /subagents-adopt never does.
	assert.equal(startsTurn("own", false), true);
	assert.equal(startsTurn("earlier", false), false, "no turn after a print run's answer for an earlier run's result");
	assert.equal(startsTurn("earlier", true), true);
	assert.equal(startsTurn("adopted", true), false);
	assert.equal(startsTurn("adopted", false), false);
});

/** A fake command whose follow answers each watched delegation when the test says. */
function service(runs: Array<{ id: string; status?: string; started?: string }>, done: Set<string>) {
	const calls: string[][] = [];
	const follows = new Map<string, (env: unknown) => void>();
	const env = (id: string) => ({ delegation_id: id, done: done.has(id), items: [{ task_id: `t-${id}`, name: id, status: done.has(id) ? "completed" : "running", done: done.has(id), output: `answer of ${id}` }] });
	const cli = () =>
		({
			call: async (verb: string, flags: string[] = [], ids: string[] = []) => {
				calls.push([verb, ...flags, ...ids]);
				if (verb === "list") return { runs };
				if (verb === "status") return env(ids[0]);
				return {};
			},
			follow: (id: string) => new Promise((resolve) => follows.set(id, resolve)),
		}) as unknown as SubagentsCli;
	return { calls, cli, finish: (id: string) => (done.add(id), follows.get(id)?.(env(id))) };
}

function sent() {
	const messages: Array<{ details: { delegationId?: string; adoptedFrom?: string }; content: string; triggerTurn?: boolean }> = [];
	const api = {
		sendMessage: (m: { details: { delegationId?: string }; content: string }, o?: { triggerTurn?: boolean }) => messages.push({ ...m, triggerTurn: o?.triggerTurn }),
	} as unknown as ExtensionAPI;
	return { messages, api };
}

function deadPid(): number {
	return Number(spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }).stdout);
}

test("/subagents-adopt takes a dead session's results: finished ones at once, running ones when they end, never with a turn", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	mkdirSync(join(dir, "pending"));
	const path = join(dir, "pending", "crashed");
	writeMark(path, { holder: { pid: deadPid() }, cwd: "/work/project", session: "/s/crashed.jsonl" });
	const svc = service([{ id: "delegation-a" }, { id: "delegation-b" }], new Set(["delegation-a"]));
	const out = sent();
	const d = new Delivery(out.api, svc.cli, () => dir);
	const r = await d.adopt(session("adopter", { mode: "rpc" }), { id: "crashed", path });
	assert.deepEqual(r, { taken: 2, running: 1 });
	assert.ok(isThisProcess(readMark(path).holder), "the adopter holds the crashed session's mark now");
	assert.deepEqual(
		out.messages.map((m) => [m.details.delegationId, m.details.adoptedFrom, m.triggerTurn]),
		[["delegation-a", "crashed", false]],
		"the finished result is delivered at once, named for its session, without a turn",
	);
	assert.match(out.messages[0].content, /answer of delegation-a[\s\S]*\/subagents-adopt from the earlier pi session crashed/);
	assert.deepEqual(d.running(), ["delegation-b"]);
	svc.finish("delegation-b");
	await new Promise((r) => setTimeout(r, 10));
	assert.deepEqual(
		out.messages.map((m) => [m.details.delegationId, m.triggerTurn]),
		[
			["delegation-a", false],
			["delegation-b", false],
		],
	);

	// A second adopter (or the crashed session resumed) leaves them to the live one.
	const other = new Delivery(sent().api, svc.cli, () => dir);
	writeMark(path, { holder: { pid: process.ppid }, cwd: "/work/project" });
	assert.equal(await other.adopt(session("late", { mode: "rpc" }), { id: "crashed", path }), undefined);
	d.shutdown();
});

test("a session resumed while another live pi holds its results leaves them to it", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	mkdirSync(join(dir, "pending"));
	writeMark(join(dir, "pending", "s"), { holder: { pid: process.ppid }, cwd: "/work/project" });
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => dir);
	await d.resume(session("s"));
	assert.deepEqual(r.calls, [], "nothing asked, nothing delivered a second time");

	// Its pi gone, the session takes them back and holds the mark.
	writeMark(join(dir, "pending", "s"), { holder: { pid: deadPid() }, cwd: "/work/project" });
	await d.resume(session("s"));
	assert.deepEqual(r.calls, [{ verb: "list", passive: true }]);
});

test("a closed session lets its mark go: what is still open waits for nobody", () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	const d = new Delivery(pi, recorder().cli, () => dir);
	d.delivering(session("s", { file: "/sessions/s.jsonl" }));
	const path = join(dir, "pending", "s");
	const m = readMark(path);
	assert.ok(isThisProcess(m.holder));
	assert.equal(m.cwd, "/work/project");
	assert.equal(m.session, "/sessions/s.jsonl");
	d.shutdown();
	assert.deepEqual(Object.keys(readMark(path)).sort(), ["at", "cwd", "session"], "no holder after the shutdown");
});

test("print runs: an earlier run's result rides along without a turn, the run's own background result gets one", async () => {
	const svc = service([{ id: "delegation-old" }], new Set());
	const d = new Delivery(sent().api, svc.cli, () => undefined);
	// A run under way: results wait for its turn boundaries.
	await d.resume(session("s", { idle: false }));
	assert.equal(d.waitingFor("earlier"), 1);
	d.watch("delegation-mine");
	assert.equal(d.waitingFor("own"), 1);
	svc.finish("delegation-old");
	await d.settled("earlier");
	const early = d.takeDrafts(false);
	assert.deepEqual(
		early.entries.map((e) => e.details.delegationId),
		["delegation-old"],
	);
	assert.equal(early.turn, false, "an earlier run's result starts no turn in a print run");
	const waited = d.nextResult(undefined, "own");
	svc.finish("delegation-mine");
	await waited;
	const mine = d.takeDrafts(false);
	assert.deepEqual(
		mine.entries.map((e) => e.details.delegationId),
		["delegation-mine"],
	);
	assert.equal(mine.turn, true);
	d.shutdown();
});

test("a mark this process wrote by delegating stays while its delegation may not be listed yet", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => dir);
	d.delivering(session("s"));
	await d.resume(session("s"));
	assert.deepEqual(r.calls, [{ verb: "list", passive: true }]);
	assert.ok(existsSync(join(dir, "pending", "s")), "the delegation this process is starting may not be listed yet");
});

test("the look for other sessions' leftovers asks only a service that runs", async () => {
	// `subagents stop`, then a pi in a folder where an earlier pi left a
	// mark: the look must not start the service (only a delegation or an
	// explicit command does); with none running it fails as not running.
	const notRunning = new SubagentsError("SERVICE_UNAVAILABLE", "no subagents service runs", "unavailable", true);
	const r = recorder(() => notRunning);
	const d = new Delivery(pi, r.cli, () => mkdtempSync(join(tmpdir(), "subagents-delivery-")));
	await assert.rejects(
		d.strayReport([{ id: "gone", path: "/nonexistent/pending/gone", mark: { holder: { pid: deadPid() }, cwd: "/work/project" } }]),
		(e: unknown) => e instanceof SubagentsError && e.notRunning,
	);
	assert.deepEqual(r.calls, [{ verb: "list", passive: true }]);
});

/**
 * A service whose tasks' sessions answer a wait when the test ends their
 * turn: as `wait SESSION` answers, the session's latest turn and no
 * delegation (a message to a running task is its next turn, which no
 * delegation carries).
 */
function sessions() {
	const follows = new Map<string, (env: unknown) => void>();
	const fails = new Map<string, (e: unknown) => void>();
	const calls: string[] = [];
	const cli = () =>
		({
			call: async (verb: string) => {
				calls.push(verb);
				return verb === "list" ? { runs: [] } : {};
			},
			follow: (id: string) => {
				calls.push(`wait ${id}`);
				return new Promise((resolve, reject) => (follows.set(id, resolve), fails.set(id, reject)));
			},
		}) as unknown as SubagentsCli;
	const end = (id: string, turn: number) =>
		follows.get(id)?.({ task_id: id, done: true, items: [{ task_id: id, name: "send-target", status: "completed", done: true, turn, output: `turn ${turn} of ${id}: the tests are checked too` }] });
	return { calls, cli, end, gone: (id: string) => fails.get(id)?.(new SubagentsError("SESSION_NOT_FOUND", `no session ${id}`)) };
}

/** A pi that records the messages and entries the delivery writes, and a session whose branch holds entries. */
function recording(branch: unknown[] = []) {
	const messages: Array<{ customType: string; content: string; details: { turn?: string; delegationId?: string }; triggerTurn?: boolean }> = [];
	const entries: Array<{ customType: string; data: unknown }> = [];
	const api = {
		sendMessage: (m: (typeof messages)[number], o?: { triggerTurn?: boolean }) => messages.push({ ...m, triggerTurn: o?.triggerTurn }),
		appendEntry: (customType: string, data: unknown) => entries.push({ customType, data }),
	} as unknown as ExtensionAPI;
	const ctx = (mode = "tui") => ({ ...session("parent", { mode }), sessionManager: { getSessionId: () => "parent", getBranch: () => branch, getSessionFile: () => undefined } }) as unknown as ExtensionContext;
	return { messages, entries, api, ctx };
}

const tick = () => new Promise((r) => setTimeout(r, 10));

test("a message sent to a running task: the answer of that turn comes back into the session as a background result does, once", async () => {
	const svc = sessions();
	const pi = recording();
	const d = new Delivery(pi.api, svc.cli, () => undefined);
	d.watchTurn("s-1", 2, pi.ctx());
	assert.deepEqual(pi.entries, [{ customType: TURN_SENT_TYPE, data: { session: "s-1", turn: 2 } }], "the session notes what it waits for");
	assert.deepEqual(d.running(), ["s-1#2"]);
	// Watched twice (a second send of the same turn number cannot be, but a restart's look can): one wait.
	d.watchTurn("s-1", 2, pi.ctx());
	assert.deepEqual(svc.calls, ["wait s-1"]);
	svc.end("s-1", 2);
	await tick();
	assert.equal(pi.messages.length, 1);
	const [m] = pi.messages;
	assert.equal(m.customType, "subagents-result");
	assert.equal(m.details.turn, "s-1#2");
	assert.equal(m.details.delegationId, undefined, "no delegation to acknowledge");
	assert.equal(m.triggerTurn, true, "in the terminal it starts a turn, as a background result does");
	assert.match(m.content, /turn 2 of s-1[^]*the tests are checked too/);
	assert.deepEqual(d.running(), []);
	d.watchTurn("s-1", 2, pi.ctx());
	await tick();
	assert.equal(pi.messages.length, 1, "delivered once");
	assert.deepEqual(svc.calls, ["wait s-1"]);
	d.shutdown();
});

test("the answer of a message to a running task that had not come when pi stopped comes at the session's next start, once", async () => {
	const sentEntry = { type: "custom", customType: TURN_SENT_TYPE, data: { session: "s-1", turn: 2 } };
	const delivered = { type: "custom_message", customType: "subagents-result", details: { turn: "s-1#2" } };
	const goneEntry = { type: "custom", customType: TURN_SENT_TYPE, data: { session: "s-1", turn: 2, gone: true } };
	for (const [what, branch, waits] of [
		["still waited for", [sentEntry], true],
		["delivered before the stop", [sentEntry, delivered], false],
		["its session gone", [sentEntry, goneEntry], false],
	] as const) {
		const svc = sessions();
		const pi = recording([...branch]);
		const d = new Delivery(pi.api, svc.cli, () => undefined);
		await d.resume(pi.ctx());
		assert.deepEqual(svc.calls, waits ? ["list", "wait s-1"] : ["list"], what);
		assert.deepEqual(pi.entries, [], `${what}: noted once already`);
		svc.end("s-1", 2);
		await tick();
		assert.equal(pi.messages.length, waits ? 1 : 0, what);
		d.shutdown();
	}

	// A session gone before its answer came: noted, so that no later start waits for it.
	const svc = sessions();
	const pi = recording();
	const d = new Delivery(pi.api, svc.cli, () => undefined);
	d.watchTurn("s-1", 2, pi.ctx());
	svc.gone("s-1");
	await tick();
	assert.deepEqual(
		pi.entries.map((e) => e.data),
		[
			{ session: "s-1", turn: 2 },
			{ session: "s-1", turn: 2, gone: true },
		],
	);
	assert.equal(pi.messages.length, 0);
	d.shutdown();
});

