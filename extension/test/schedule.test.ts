import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { SubagentsError, type SubagentsCli } from "../src/cli.ts";
import { Delivery } from "../src/delivery.ts";
import { processStart, thisProcess } from "../src/liveness.ts";
import { markScheduled, noteOpen, scheduledMark, scheduleFolder, scheduleOp, scheduleText } from "../src/schedule.ts";

/** A fake command: answer gives each call's envelope; calls records the requests. */
function fakeCli(answer: (input: Record<string, unknown>, verb: string) => unknown, local?: string) {
	const calls: Array<{ verb: string; input?: Record<string, unknown>; flags: string[]; positional: string[] }> = [];
	const cli = {
		options: { bin: "subagents", connection: [], ...(local && { local: { dataDir: local } }) },
		call: async (verb: string, flags: string[] = [], positional: string[] = [], input?: Record<string, unknown>) => {
			calls.push({ verb, input, flags, positional });
			const a = answer(input ?? {}, verb);
			if (a instanceof Error) throw a;
			return a;
		},
	} as unknown as SubagentsCli;
	return { cli, calls };
}

function session(id: string, cwd: string, branch: unknown[] = []): ExtensionContext {
	return {
		sessionManager: { getSessionId: () => id, getBranch: () => branch, getSessionFile: () => undefined },
		hasUI: false,
		isIdle: () => true,
		mode: "rpc",
		cwd,
	} as unknown as ExtensionContext;
}

function result(id: string, status = "completed") {
	return {
		contract_version: "subagents.v1",
		op: "status",
		backend: "temporal",
		delegation_id: id,
		status,
		done: true,
		items: [{ task_id: "t", index: 0, name: "scan", agent: "scout", status, done: true, output: `output of ${id}` }],
	};
}

test("scheduleOp passes the folder and the object, marks the folder on create, and says what the model reads", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const { cli, calls } = fakeCli(
		(input) => ({
			op: "schedule",
			done: true,
			text: input.action === "create" ? "Schedule scan-1a2b3c created: every 2h." : "",
			schedules: [{ id: "scan-1a2b3c", name: "scan", spec: "every 2h", overlap: "skip", catchup: "none", paused: input.action === "pause", note: "holidays", fires: 2, next_fires: ["2026-11-26T12:00:00Z"], runs: [{ id: "f1", status: "failed", fired: "2026-11-26T10:00:00Z", summary: "timed out", result_id: "f1-result" }] }],
		}),
		dir,
	);
	const ctx = session("s", "/work/project");
	const created = await scheduleOp(cli, ctx, { action: "create", every: "2h", tasks: [{ agent: "scout", prompt: "scan" }] });
	assert.deepEqual(calls[0].input, { cwd: "/work/project", action: "create", every: "2h", tasks: [{ agent: "scout", prompt: "scan" }] });
	assert.match(created.text, /Schedule scan-1a2b3c created: every 2h\.\nscan-1a2b3c "scan": every 2h, next 2026-11-26T12:00:00Z, last run failed/);
	assert.ok(existsSync(scheduledMark(dir, "/work/project")), "the folder is marked where this pi looks");

	const listed = await scheduleOp(cli, ctx, { action: "list" });
	assert.match(listed.text, /^1 schedule\(s\) in this folder:\n- scan-1a2b3c/);
	const described = await scheduleOp(cli, ctx, { action: "describe", id: "scan-1a2b3c" });
	assert.match(described.text, /fired 2 time\(s\)/);
	assert.match(described.text, /- 2026-11-26T10:00:00Z failed, waiting for a pi session here: timed out/);
	const paused = await scheduleOp(cli, ctx, { action: "pause", id: "scan-1a2b3c", note: "holidays" });
	assert.match(paused.text, /paused \(holidays\)/);

	for (const bad of [undefined, "list", [], { action: "claim" }, { action: "run" }]) {
		await assert.rejects(scheduleOp(cli, ctx, bad), (e: unknown) => e instanceof SubagentsError && e.code === "INVALID_INPUT");
	}
	assert.equal(scheduleText("list", { op: "schedule", done: true } as never), "No schedules in this folder.");
});

test("a paused schedule's answer has no next fire: it says since when, why, and the action that resumes it", async () => {
	// An older service lists a paused schedule's next fires where the pause left them.
	const paused = { id: "scan-1a2b3c", name: "scan", spec: "every 2h", overlap: "skip", catchup: "none", paused: true, paused_since: "2026-11-26T07:00:00Z", note: "holidays", fires: 2, next_fires: ["2026-11-26T08:00:00Z"] };
	const { cli } = fakeCli(() => ({ op: "schedule", done: true, text: "Schedule scan-1a2b3c paused (since 2026-11-26T07:00:00Z: holidays): no fires until `subagents schedule resume scan-1a2b3c`.", schedules: [paused] }));
	const ctx = session("s", "/work/project");
	for (const action of ["pause", "list", "describe"]) {
		const { text } = await scheduleOp(cli, ctx, { action, id: "scan-1a2b3c" });
		assert.match(text, /paused \(since 2026-11-26T07:00:00Z: holidays\): no fires until resumed \(action "resume", id "scan-1a2b3c"\)/, action);
		assert.doesNotMatch(text, /next:? 2026-11-26T08:00:00Z/, action);
	}
});

test("a folder without the mark asks nothing for scheduled results", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const { cli, calls } = fakeCli(() => ({ runs: [] }));
	const d = new Delivery({ sendMessage: () => {} } as unknown as ExtensionAPI, () => cli, () => dir);
	await d.resume(session("s", "/elsewhere"), true);
	assert.deepEqual(calls, []);
});

test("scheduled results are claimed, delivered without a turn, and acknowledged to their result's workflow", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const cwd = "/work/project";
	markScheduled(dir, cwd);
	const sent: Array<{ content: string; details: Record<string, unknown>; triggerTurn?: boolean }> = [];
	const pi = { sendMessage: (m: { content: string; details: Record<string, unknown> }, o: { triggerTurn?: boolean }) => sent.push({ ...m, triggerTurn: o.triggerTurn }) } as unknown as ExtensionAPI;
	const me = thisProcess();
	const { cli, calls } = fakeCli((input, verb) => {
		if (verb !== "schedule") return { runs: [] };
		if (input.action === "ack") return { op: "schedule", done: true };
		const replaced = (input.replace as string[] | undefined) ?? [];
		return {
			op: "schedule",
			done: true,
			schedules: [
				{
					id: "nightly",
					runs: [
						{ id: "nightly-1", result_id: "nightly-1-result", status: "completed", fired: "2026-11-26T01:00:00Z", result: result("delegation-nightly-1") },
						// Held by a pi of this machine that is gone (pid 0 is never one): taken over.
						replaced.includes("dead")
							? { id: "nightly-2", result_id: "nightly-2-result", status: "failed", fired: "2026-11-26T02:00:00Z", result: result("delegation-nightly-2", "failed") }
							: { id: "nightly-2", result_id: "nightly-2-result", status: "failed", fired: "2026-11-26T02:00:00Z", claimed_by: "dead", holder: { pid: 0 } },
						// Held by a live pi (this very process stands for one): left to it.
						{ id: "nightly-3", result_id: "nightly-3-result", status: "completed", fired: "2026-11-26T03:00:00Z", claimed_by: "other", holder: { pid: me.pid, start: me.start } },
						// Already in this session (a restart before its ack): acknowledged only.
						{ id: "nightly-4", result_id: "nightly-4-result", status: "completed", fired: "2026-11-26T04:00:00Z", result: result("delegation-nightly-4") },
					],
				},
			],
		};
	});
	const branch = [{ type: "custom_message", customType: "subagents-result", details: { delegationId: "delegation-nightly-4" } }];
	const d = new Delivery(pi, () => cli, () => dir);
	await d.resume(session("me", cwd, branch), true);
	const claims = calls.filter((c) => c.input?.action === "claim");
	assert.equal(claims.length, 2, "one claim, then one that replaces the gone holder");
	assert.deepEqual(claims[0].input?.by, "me");
	assert.deepEqual((claims[0].input?.holder as { pid: number }).pid, me.pid);
	assert.deepEqual(claims[1].input?.replace, ["dead"]);
	assert.deepEqual(
		sent.map((m) => m.details.delegationId),
		["delegation-nightly-1", "delegation-nightly-2"],
		"the won results, each once, oldest first",
	);
	assert.ok(sent.every((m) => m.triggerTurn === false), "a scheduled result starts no turn");
	// A claim of an older service has no end: its fired is when the result was left.
	assert.match(sent[0].content, /^A scheduled run of schedule nightly \(nightly-1\) ended at 2026-11-26T01:00:00Z while no pi session was open here; its result:/);
	const acks = calls.filter((c) => c.input?.action === "ack");
	assert.deepEqual(acks.map((a) => a.input?.ids), [["nightly-4-result"]], "the one already in the session is acknowledged to its result's workflow");
	assert.equal(calls.filter((c) => c.verb === "ack").length, 0, "no delegation ack for a scheduled run");
	d.shutdown();
});

test("a scheduled result says when its run fired and ended, and whether a pi session was open here then", async () => {
	const cwd = "/work/project";
	const now = Date.now();
	const iso = (ms: number) => new Date(ms).toISOString();
	const ended = now - 30 * 60_000;
	/** What the session "me" receives of a run that ended at ended, once setup has noted who was open. */
	async function delivered(setup: (dir: string, d: Delivery, ctx: ExtensionContext) => void): Promise<string> {
		const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
		markScheduled(dir, cwd);
		const sent: string[] = [];
		const pi = { sendMessage: (m: { content: string }) => sent.push(m.content) } as unknown as ExtensionAPI;
		const { cli } = fakeCli((input, verb) => {
			if (verb !== "schedule") return { runs: [] };
			if (input.action === "ack") return { op: "schedule", done: true };
			const run = { id: "nightly-2026-11-26T01:00:00Z", result_id: "nightly-2026-11-26T01:00:00Z-result", status: "completed", fired: "2026-11-26T01:00:00Z", ended: iso(ended), result: result("delegation-nightly-1") };
			return { op: "schedule", done: true, schedules: [{ id: "nightly", runs: [run] }] };
		});
		const d = new Delivery(pi, () => cli, () => dir);
		const ctx = session("me", cwd);
		setup(dir, d, ctx);
		await d.resume(ctx);
		d.shutdown();
		assert.equal(sent.length, 1);
		return sent[0];
	}
	const intro = (where: string) => new RegExp(`^A scheduled run of schedule nightly \\(nightly-2026-11-26T01:00:00Z\\) fired at 2026-11-26T01:00:00Z and ended at ${iso(ended).replace(/[.]/g, "\\.")}${where}; its result:\n\n`);
	const parent = { pid: process.ppid, start: processStart(process.ppid) };
	const gone = { pid: 2 ** 22 + 7, start: "1" };

	// Nobody here: what the message always said is true now.
	assert.match(await delivered(() => {}), intro(" while no pi session was open here"));
	// A session of another folder, and one here that closed before the run ended, were no session here then.
	assert.match(
		await delivered((dir) => {
			noteOpen(dir, parent, now - 3 * 3600_000, { cwd: "/elsewhere", session: "far" });
			noteOpen(dir, gone, now - 2 * 3600_000, { cwd, session: "earlier" });
			noteOpen(dir, gone, now - 3600_000);
		}),
		intro(" while no pi session was open here"),
	);
	// This session was open when the run ended (it took the result at its next look).
	assert.match(
		await delivered((_dir, d, ctx) => d.opened(ctx, now - 3600_000)),
		intro(" while this session was open \\(a folder's scheduled results come when a session starts, or starts the service\\)"),
	);
	// Another pi (a live process) had a session open here.
	assert.match(
		await delivered((dir, d, ctx) => {
			noteOpen(dir, parent, now - 3600_000, { cwd, session: "other" });
			d.opened(ctx, now);
		}),
		intro(" while another pi session was open here \\(a folder's scheduled results come when a session starts\\)"),
	);
	// A pi killed while its session was open here: whether it was open then is not known, and not said.
	assert.match(await delivered((dir) => noteOpen(dir, gone, now - 3600_000, { cwd, session: "killed" })), intro(""));
});

test("the open records are swept once a day, of their files only those last written a month ago and of pis gone", () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-open-"));
	const now = Date.now();
	const day = 24 * 3600_000;
	const parent = { pid: process.ppid, start: processStart(process.ppid) };
	const gone = (n: number) => ({ pid: 2 ** 22 + n, start: "1" });
	const record = (h: { pid: number; start?: string }) => join(dir, "open", `${h.pid}-${h.start}`);
	/** A record closed at `at`, whose file was last written then. */
	const closed = (h: { pid: number; start?: string }, at: number) => {
		noteOpen(dir, h, at - 3600_000, { cwd: "/p", session: `s${h.pid}` });
		noteOpen(dir, h, at);
		utimesSync(record(h), new Date(at), new Date(at));
	};
	closed(gone(1), now - 40 * day);
	closed(gone(2), now - 2 * day);
	// A pi still alive that opened its session long ago keeps its record.
	noteOpen(dir, parent, now - 40 * day, { cwd: "/p", session: "long" });
	utimesSync(record(parent), new Date(now - 40 * day), new Date(now - 40 * day));
	const names = () => readdirSync(join(dir, "open")).filter((n) => !n.startsWith(".")).sort();
	// The notes above swept already (each at its own time): sweep afresh from now on.
	utimesSync(join(dir, "open", ".swept"), new Date(now - 2 * day), new Date(now - 2 * day));
	noteOpen(dir, thisProcess(), now, { cwd: "/p", session: "me" });
	assert.deepEqual(names(), [record(gone(2)), record(parent), record(thisProcess())].map((p) => p.slice(p.lastIndexOf("/") + 1)).sort());
	// A month-old half-written record (its pi killed as it wrote) goes with the sweep.
	const half = `${record(gone(4))}.tmp`;
	writeFileSync(half, "{");
	utimesSync(half, new Date(now - 40 * day), new Date(now - 40 * day));
	utimesSync(join(dir, "open", ".swept"), new Date(now - 2 * day), new Date(now - 2 * day));
	noteOpen(dir, thisProcess(), now, { cwd: "/p", session: "me" });
	assert.equal(existsSync(half), false);
	// Within the day, a record gone by then stays: nothing is read.
	closed(gone(3), now - 40 * day);
	noteOpen(dir, thisProcess(), now + 3600_000, { cwd: "/p", session: "me" });
	assert.ok(existsSync(record(gone(3))), "swept twice in a day");
	// A day later it goes.
	noteOpen(dir, thisProcess(), now + day + 1, { cwd: "/p", session: "me" });
	assert.equal(existsSync(record(gone(3))), false);
	assert.ok(existsSync(record(parent)));
});

test("a folder whose schedules are gone and whose results were all taken loses its mark (once it is a minute old)", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const cwd = "/work/project";
	markScheduled(dir, cwd);
	const { cli } = fakeCli(() => ({ op: "schedule", done: true, schedules: [] }));
	const d = new Delivery({ sendMessage: () => {} } as unknown as ExtensionAPI, () => cli, () => dir);
	await d.resume(session("s", cwd), true);
	assert.ok(existsSync(scheduledMark(dir, cwd)), "a fresh mark stays: its schedule may not be listed yet");
	const old = new Date(Date.now() - 120_000);
	utimesSync(scheduledMark(dir, cwd), old, old);
	await d.resume(session("s", cwd), true);
	assert.equal(existsSync(scheduledMark(dir, cwd)), false);
});

test("no service running: the look for scheduled results waits for its start", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	markScheduled(dir, "/p");
	const { cli } = fakeCli(() => new SubagentsError("SERVICE_UNAVAILABLE", "no service", "unavailable", true));
	const d = new Delivery({ sendMessage: () => {} } as unknown as ExtensionAPI, () => cli, () => dir);
	await d.resume(session("s", "/p"), true);
	assert.ok(existsSync(scheduledMark(dir, "/p")));
});

test("a folder reached through a link is its real path: the op's cwd, the mark, and the claim agree with the command's", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const base = mkdtempSync(join(tmpdir(), "subagents-folder-"));
	const real = join(base, "real");
	mkdirSync(real);
	const link = join(base, "link");
	symlinkSync(real, link);
	const folder = realpathSync(real);
	assert.equal(scheduleFolder(link), folder);
	assert.equal(scheduleFolder("/no/such/folder"), "/no/such/folder", "a folder that cannot be resolved stays as given");

	// The op made in pi started through the link: the command gets the real folder, the mark is the real folder's.
	const made = fakeCli(() => ({ op: "schedule", done: true, schedules: [] }), dir);
	await scheduleOp(made.cli, session("s", link), { action: "create", every: "1h", prompt: "x" });
	assert.equal(made.calls[0].input?.cwd, folder);
	assert.ok(existsSync(scheduledMark(dir, folder)), "the real folder is marked");

	// A mark the command wrote for the real folder is found by a pi started through the link, whose claim names the real folder.
	const marks = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	markScheduled(marks, folder);
	const { cli, calls } = fakeCli(() => ({ op: "schedule", done: true, schedules: [{ id: "nightly", runs: [] }] }));
	const d = new Delivery({ sendMessage: () => {} } as unknown as ExtensionAPI, () => cli, () => marks);
	assert.ok(d.mayHaveScheduled(session("s", link)));
	await d.resume(session("s", link), true);
	const claims = calls.filter((c) => c.input?.action === "claim");
	assert.equal(claims.length, 1);
	assert.equal(claims[0].input?.cwd, folder);
	d.shutdown();
});

test("a folder whose schedule was deleted while a run of it runs keeps its mark until that run's result is taken", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-schedule-"));
	const cwd = "/work/project";
	markScheduled(dir, cwd);
	const old = new Date(Date.now() - 120_000);
	utimesSync(scheduledMark(dir, cwd), old, old);
	// The claim lists the deleted schedule while its run runs (running), and no result yet.
	let answer: unknown = { op: "schedule", done: true, schedules: [{ id: "gone", running: 1 }] };
	const { cli } = fakeCli(() => answer);
	const d = new Delivery({ sendMessage: () => {} } as unknown as ExtensionAPI, () => cli, () => dir);
	await d.resume(session("s", cwd), true);
	assert.ok(existsSync(scheduledMark(dir, cwd)), "the mark stays while a run's result is to come");
	// Its result taken, nothing left: the mark goes.
	answer = { op: "schedule", done: true, schedules: [] };
	await d.resume(session("s", cwd), true);
	assert.equal(existsSync(scheduledMark(dir, cwd)), false);
	d.shutdown();
});
