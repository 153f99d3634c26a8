import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { SubagentsCli } from "../src/cli.ts";
import { stderrOf } from "./stderr.ts";
import { DOCTOR_DEADLINE_S, DOCTOR_STOP_MS, type DoctorReport, doctorArgs, formatReport, registerDoctor, runDoctor } from "../src/doctor.ts";

const report: DoctorReport = {
	status: "fail",
	exit_code: 3,
	summary: { ok: 1, warn: 1, fail: 1, skip: 1 },
	context: { cwd: "/src/app", data_dir: "/d", address: "127.0.0.1:7233", namespace: "default", task_queues: ["subagents"], local: true },
	checks: [
		{ name: "pi", status: "ok", verdict: "pi 0.87.1 at /t/pi (source tree)" },
		{ name: "service", status: "fail", verdict: "no subagents service runs for data dir /d", fix: "start it: `subagents dev`" },
		{ name: "socket", status: "skip", verdict: "no socket answers (see service)", fix: "never shown" },
		{ name: "disk", status: "warn", verdict: "only 1.0 GiB free", fix: "free some space" },
	],
};

test("the report as pi shows it: totals, each verdict, the fix under failures and warnings", () => {
	const { text, level } = formatReport(report);
	assert.equal(level, "error");
	assert.equal(
		text,
		[
			"subagents doctor: 1 failed, 1 warning, 1 ok, 1 skipped (/src/app)",
			"✓ pi: pi 0.87.1 at /t/pi (source tree)",
			"✗ service: no subagents service runs for data dir /d",
			"    fix: start it: `subagents dev`",
			"– socket: no socket answers (see service)",
			"! disk: only 1.0 GiB free",
			"    fix: free some space",
		].join("\n"),
	);
	assert.equal(formatReport({ ...report, summary: { ok: 3, warn: 1, fail: 0, skip: 0 } }).level, "warning");
	assert.equal(formatReport({ ...report, summary: { ok: 4, warn: 0, fail: 0, skip: 0 } }).level, "info");
});

test("the command is told the folder and where this pi's delegations go", () => {
	const cli = new SubagentsCli({
		bin: "subagents",
		connection: ["--address", "127.0.0.1:7300"],
		local: { address: "127.0.0.1:7300", addressSet: true, taskQueue: "q", dataDir: "/d", autoStart: true },
	});
	assert.deepEqual(doctorArgs("/src/app", cli), [
		"doctor", "--json", "--cwd", "/src/app", "--timeout", "30s", "--address", "127.0.0.1:7300", "--task-queue", "q", "--data-dir", "/d",
	]);
	const remote = new SubagentsCli({ bin: "subagents", connection: ["--address", "t.example:7233", "--task-queue", "q"] });
	assert.deepEqual(doctorArgs("/w", remote), ["doctor", "--json", "--cwd", "/w", "--timeout", "30s", "--address", "t.example:7233", "--task-queue", "q"]);
});

// The doctor answers by its deadline, whatever hangs (its checks that run
// out say so); pi waits for that with a margin, and only a doctor that is
// itself hung past it is stopped.
test("the command is given a deadline, and stopped only well past it", async () => {
	assert.equal(DOCTOR_DEADLINE_S, 30);
	assert.ok(DOCTOR_STOP_MS >= DOCTOR_DEADLINE_S * 1000 + 10_000, `stopped after ${DOCTOR_STOP_MS} ms, too close to the ${DOCTOR_DEADLINE_S} s deadline`);
	const dir = mkdtempSync(join(tmpdir(), "subagents-doctor-"));
	const bin = join(dir, "subagents");
	writeFileSync(bin, "#!/bin/sh\nexec sleep 30\n");
	chmodSync(bin, 0o755);
	const start = Date.now();
	await assert.rejects(runDoctor(bin, ["doctor"], process.env, dir, 200), /subagents doctor was stopped \(SIGTERM\) after 0.2 s: no output/);
	assert.ok(Date.now() - start < 5_000);
});

// A subagents command that records how it was run and prints report:
// /subagents-doctor runs it as a process, with nothing answering on a
// socket and nothing started (the tools' path would fail with no service).
test("/subagents-doctor runs the command itself and shows its verdicts", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-doctor-"));
	const bin = join(dir, "subagents");
	const seen = join(dir, "seen");
	writeFileSync(join(dir, "report.json"), JSON.stringify(report));
	writeFileSync(bin, `#!/bin/sh\necho "$@" > ${seen}\necho "$SUBAGENTS_DATA_DIR" >> ${seen}\ncat ${join(dir, "report.json")}\necho "subagents: doctor: 1 check failed (service)" >&2\nexit 3\n`);
	chmodSync(bin, 0o755);
	const data = join(dir, "data");
	let registered: { handler: (args: string, ctx: unknown) => Promise<void> } | undefined;
	const pi = { registerCommand: (name: string, def: typeof registered) => name === "subagents-doctor" && (registered = def) };
	const cli = (passive = false) =>
		new SubagentsCli({ bin, connection: [], passive, local: { address: "127.0.0.1:1", addressSet: false, dataDir: data, autoStart: true } });
	registerDoctor(pi as never, cli);
	const notes: Array<[string, string]> = [];
	await registered!.handler("", { cwd: dir, hasUI: true, ui: { notify: (m: string, l: string) => notes.push([m, l]) } });
	assert.equal(notes.length, 1);
	assert.equal(notes[0][1], "error");
	assert.match(notes[0][0], /✗ service: no subagents service runs for data dir \/d\n {4}fix: start it: `subagents dev`/);
	assert.deepEqual(readFileSync(seen, "utf8").split("\n"), [`doctor --json --cwd ${dir} --timeout 30s --data-dir ${data}`, data, ""]);

	// A command that prints no document: what it said, as an error.
	writeFileSync(bin, "#!/bin/sh\necho 'subagents: unknown command \"doctor\"' >&2\nexit 2\n");
	await registered!.handler("", { cwd: dir, hasUI: true, ui: { notify: (m: string, l: string) => notes.push([m, l]) } });
	assert.deepEqual(notes[1], ['subagents doctor exited 2: subagents: unknown command "doctor"', "error"]);
});

test("/subagents-doctor answers in print and JSON runs too: on stderr, and as a session entry JSON prints", async () => {
	const dir = mkdtempSync(join(tmpdir(), "subagents-doctor-"));
	const bin = join(dir, "subagents");
	writeFileSync(join(dir, "report.json"), JSON.stringify(report));
	writeFileSync(bin, `#!/bin/sh\ncat ${join(dir, "report.json")}\nexit 3\n`);
	chmodSync(bin, 0o755);
	let registered: { handler: (args: string, ctx: unknown) => Promise<void> } | undefined;
	const entries: Array<[string, { command: string; level: string; text: string }]> = [];
	const pi = { registerCommand: (name: string, def: typeof registered) => name === "subagents-doctor" && (registered = def), appendEntry: (t: string, d: never) => entries.push([t, d]) };
	registerDoctor(pi as never, (passive = false) => new SubagentsCli({ bin, connection: [], passive }));
	// pi's print and JSON runs: no UI, a notify that does nothing.
	const ctx = (mode: string) => ({ cwd: dir, mode, hasUI: false, ui: { notify: () => assert.fail("notified where nobody sees it") } });

	const said = await stderrOf(() => registered!.handler("", ctx("print")));
	assert.match(said, /^subagents doctor: 1 failed[^]*✗ service: no subagents service runs for data dir \/d\n {4}fix: start it: `subagents dev`/);
	assert.deepEqual(entries, []);

	assert.equal(await stderrOf(() => registered!.handler("", ctx("json"))), "", "a JSON run's stdout and stderr are pi's");
	assert.equal(entries.length, 1);
	assert.equal(entries[0][0], "subagents-answer");
	assert.equal(entries[0][1].command, "subagents-doctor");
	assert.equal(entries[0][1].level, "error");
	assert.match(entries[0][1].text, /✗ service: no subagents service runs/);
});
