import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { SubagentsError, type SubagentsCli } from "../src/cli.ts";
import { Delivery } from "../src/delivery.ts";

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

function session(id: string): ExtensionContext {
	return { sessionManager: { getSessionId: () => id, getBranch: () => [] }, hasUI: false, isIdle: () => true, mode: "json" } as unknown as ExtensionContext;
}

const pi = { sendMessage: () => {} } as unknown as ExtensionAPI;

test("a start asks the local service nothing unless its session marked itself waiting", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-delivery-"));
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => dir);
	await d.resume(session("fresh"), true);
	assert.deepEqual(r.calls, [], "a session that never delegated makes no call at pi's start");

	mkdirSync(join(dir, "pending"), { recursive: true });
	writeFileSync(join(dir, "pending", "waiting"), "");
	// Written by an earlier pi: one this process wrote stays, its delegation may not have started yet.
	utimesSync(join(dir, "pending", "waiting"), new Date(0), new Date(0));
	await d.resume(session("waiting"), true);
	assert.deepEqual(r.calls, [{ verb: "list", passive: false }], "a marked session asks, starting the service if it must");
	assert.equal(existsSync(join(dir, "pending", "waiting")), false, "the mark goes once nothing of the session is open");
});

test("a remote Temporal keeps no marks: every start asks, and a passive start starts nothing", async () => {
	const r = recorder();
	const d = new Delivery(pi, r.cli, () => undefined);
	await d.resume(session("any"), true);
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
	const resumed = d.resume(stale, false);
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
	const resumed = d.resume(session("s"), false);
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
	await Promise.all([d.resume(session("s"), false), d.resume(session("s"), false)]);
	assert.equal(most, 1, "two looks never ask at the same time");
	assert.deepEqual(d.running(), ["delegation-1"], "the delegation is waited for once, though its status could not be read");
	d.shutdown();
});
