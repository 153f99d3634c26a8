import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { connectionFlags, GLOBAL_ONLY, loadSettings, localService } from "../src/settings.ts";

function world(global: object | undefined, project: object | undefined) {
	const agent = mkdtempSync(join(tmpdir(), "subagents-settings-"));
	const cwd = mkdtempSync(join(tmpdir(), "subagents-project-"));
	if (global) writeFileSync(join(agent, "subagents.json"), JSON.stringify({ extension: global }));
	if (project) {
		mkdirSync(join(cwd, ".pi"));
		writeFileSync(join(cwd, ".pi", "subagents.json"), JSON.stringify({ extension: project }));
	}
	return { agent, cwd, env: { PI_CODING_AGENT_DIR: agent, HOME: agent, SUBAGENTS_DATA_DIR: join(agent, "data") } as NodeJS.ProcessEnv };
}

// A cloned repository's .pi/subagents.json cannot say where delegations go:
// the task queue and namespace it names reach neither the command's flags
// nor the local service's, and the session is told, in one line, what was
// ignored.
test("a project's settings cannot route delegations", () => {
	const cases: Array<{ name: string; global?: object; project: object; env?: NodeJS.ProcessEnv; queue?: string; namespace?: string; ignored: string[] }> = [
		{ name: "task queue", project: { taskQueue: "evil" }, ignored: ["taskQueue"] },
		{ name: "namespace", project: { namespace: "evil" }, ignored: ["namespace"] },
		{ name: "every routing key", project: { bin: "./evil", address: "attacker.example:7233", dataDir: "/tmp/x", autoStart: true, namespace: "evil", taskQueue: "evil" }, ignored: [...GLOBAL_ONLY] },
		{ name: "the global file still routes", global: { taskQueue: "mine", namespace: "ns" }, project: { taskQueue: "evil", namespace: "evil" }, queue: "mine", namespace: "ns", ignored: ["namespace", "taskQueue"] },
		{ name: "the environment still routes", project: { taskQueue: "evil" }, env: { SUBAGENTS_TASK_QUEUE: "env-queue", TEMPORAL_NAMESPACE: "env-ns" }, queue: "env-queue", namespace: "env-ns", ignored: ["taskQueue"] },
		{ name: "harmless keys are no warning", project: { maxLinesPerWindow: 3, tools: { primary: false } }, ignored: [] },
		{ name: "a tool family the user turned off", global: { tools: { primary: false } }, project: { tools: { primary: true } }, ignored: ["tools.primary"] },
	];
	for (const c of cases) {
		const w = world(c.global, c.project);
		const env = { ...w.env, ...c.env };
		const s = loadSettings(w.cwd, env);
		const flags = connectionFlags(s);
		assert.ok(!flags.includes("evil") && !flags.includes("./evil"), `${c.name}: flags ${flags}`);
		const local = localService(s, env);
		assert.equal(local?.address, "127.0.0.1:7233", c.name);
		assert.equal(local?.taskQueue, c.queue, `${c.name}: task queue`);
		assert.equal(local?.namespace, c.namespace, `${c.name}: namespace`);
		assert.equal(local?.dataDir, join(w.agent, "data"), c.name);
		assert.equal(s.bin, "subagents", c.name);
		if (c.ignored.length === 0) {
			assert.deepEqual(s.warnings, [], c.name);
			continue;
		}
		assert.equal(s.warnings.length, 1, `${c.name}: ${s.warnings}`);
		const [line] = s.warnings;
		assert.ok(!line.includes("\n"), `${c.name}: one line`);
		assert.ok(line.includes(join(w.cwd, ".pi", "subagents.json")) && line.includes(join(w.agent, "subagents.json")), `${c.name}: ${line}`);
		assert.ok(line.includes(`sets ${c.ignored.join(", ")},`), `${c.name}: ${line}`);
	}
});

test("the project still sets what is harmless", () => {
	const w = world({ tools: { task: false } }, { maxLinesPerWindow: 3, tools: { primary: false }, taskQueue: "evil" });
	const s = loadSettings(w.cwd, w.env);
	assert.equal(s.maxLinesPerWindow, 3);
	assert.deepEqual(s.tools, { subagent: true, task: false, delegate: true, primary: false });
	const on = world({ tools: { primary: false } }, { tools: { primary: true, task: false } });
	assert.deepEqual(loadSettings(on.cwd, on.env).tools, { subagent: true, task: false, delegate: true, primary: false }, "a project turns a family off, never on");
});

// The task contract's knobs: its own variables work, ours win over them, a
// value its users kept above our bound is taken at the bound (the contract
// sets none), and a value that is no whole number is refused.
test("the task contract's throttle and retention knobs", () => {
	const cases: Array<{ name: string; env: NodeJS.ProcessEnv; throttle?: number; retention?: number; error?: RegExp }> = [
		{ name: "defaults", env: {}, throttle: 120, retention: undefined },
		{ name: "the contract's variables", env: { OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS: "500", OHM_SUBAGENTS_TASK_RETENTION_MS: "1500" }, throttle: 500, retention: 1500 },
		{ name: "ours win", env: { OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS: "500", SUBAGENTS_ONUPDATE_THROTTLE_MS: "50" }, throttle: 50 },
		{ name: "above our bound", env: { OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS: "90000", OHM_SUBAGENTS_TASK_RETENTION_MS: String(90 * 24 * 3600 * 1000) }, throttle: 60000, retention: 30 * 24 * 3600 * 1000 },
		{ name: "not a number", env: { OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS: "fast" }, error: /onUpdateThrottleMs must be a whole number/ },
		{ name: "below the bound", env: { OHM_SUBAGENTS_TASK_RETENTION_MS: "0" }, error: /taskRetentionMs must be a whole number/ },
	];
	for (const c of cases) {
		const w = world(undefined, undefined);
		const env = { ...w.env, ...c.env };
		if (c.error) {
			assert.throws(() => loadSettings(w.cwd, env), c.error, c.name);
			continue;
		}
		const s = loadSettings(w.cwd, env);
		assert.equal(s.onUpdateThrottleMs, c.throttle ?? 120, `${c.name}: throttle`);
		assert.equal(s.taskRetentionMs, c.retention, `${c.name}: retention`);
	}
});

// A key the extension does not know does nothing: the session is told, by
// its name and the near one it likely is, in the words `subagents doctor`
// and the service use ("unknown setting ... did you mean ...?"); a value
// of the wrong kind is named by its key and the kind it must be, and the
// default holds (issue 42).
test("a misspelt key or a value of the wrong kind is said, by name", () => {
	const cases: Array<{ name: string; global?: object; project?: object; warnings: string[]; check?: (s: ReturnType<typeof loadSettings>) => void }> = [
		{ name: "a misspelt key", global: { taskQueu: "q" }, warnings: ['subagents: unknown setting "extension.taskQueu" in GLOBAL: did you mean "extension.taskQueue"? The extension ignores it'] },
		{ name: "case", project: { maxlinesperwindow: 3 }, warnings: ['subagents: unknown setting "extension.maxlinesperwindow" in PROJECT: did you mean "extension.maxLinesPerWindow"? The extension ignores it'] },
		{ name: "nothing near", global: { colour: "red" }, warnings: ['subagents: unknown setting "extension.colour" in GLOBAL: the extension ignores it (docs/settings.md lists its keys)'] },
		{ name: "a tool family", global: { tools: { delegat: false } }, warnings: ['subagents: unknown setting "extension.tools.delegat" in GLOBAL: did you mean "extension.tools.delegate"? The extension ignores it'],
			check: (s) => assert.equal(s.tools.delegate, true) },
		{ name: "a switch that is a word", global: { autoStart: "no" }, warnings: ['subagents: GLOBAL: extension.autoStart must be true or false, not "no": ignored'],
			check: (s) => assert.equal(s.autoStart, true) },
		{ name: "a program that is a number", global: { bin: 5 }, warnings: ["subagents: GLOBAL: extension.bin must be a non-empty string, not 5: ignored"],
			check: (s) => assert.equal(s.bin, "subagents") },
		{ name: "a tool family that is a word", global: { tools: { task: "off" } }, warnings: ['subagents: GLOBAL: extension.tools.task must be true or false, not "off": ignored'],
			check: (s) => assert.equal(s.tools.task, true) },
		{ name: "every known key", global: { bin: "subagents", address: "127.0.0.1:7233", dataDir: "/tmp/d", autoStart: false, namespace: "n", taskQueue: "q",
			tools: { subagent: true, task: true, delegate: true, primary: true }, maxLinesPerWindow: 5, onUpdateThrottleMs: 100, taskRetentionMs: 1000 }, warnings: [] },
	];
	for (const c of cases) {
		const w = world(c.global, c.project);
		const s = loadSettings(w.cwd, w.env);
		const files = (line: string) => line.replace("GLOBAL", join(w.agent, "subagents.json")).replace("PROJECT", join(w.cwd, ".pi", "subagents.json"));
		assert.deepEqual(s.warnings, c.warnings.map(files), c.name);
		c.check?.(s);
	}
});
