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
