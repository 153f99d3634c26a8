import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { alive, isThisProcess, processStart, readMark, strays, thisProcess, withMarkLock, writeMark } from "../src/liveness.ts";

/** The pid of a process that has ended (and been reaped): nothing runs there now. */
function deadPid(): number {
	const r = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
	return Number(r.stdout);
}

function dataDir(): string {
	const dir = mkdtempSync(join(tmpdir(), "subagents-liveness-"));
	mkdirSync(join(dir, "pending"));
	return dir;
}

test("a holder is alive while its process runs, and only the process that started then", () => {
	const me = thisProcess();
	assert.equal(me.pid, process.pid);
	assert.ok(isThisProcess(me));
	assert.ok(alive(me), "this process is alive");
	assert.equal(alive({ pid: deadPid() }), false, "a pid with no process is dead");
	assert.equal(alive(undefined), false, "a mark whose pi let it go has no holder");
	if (processStart(process.pid) !== undefined) {
		// With /proc, a pid the system gave to another process does not count.
		assert.equal(alive({ pid: process.pid, start: "1" }), false, "same pid, another start: another process");
	}
});

test("marks are read whole; an empty or foreign mark holds nothing", () => {
	const dir = dataDir();
	const path = join(dir, "pending", "s1");
	writeFileSync(path, "");
	assert.deepEqual(readMark(path), {}, "an older extension's empty mark");
	writeFileSync(path, "not json");
	assert.deepEqual(readMark(path), {});
	assert.deepEqual(readMark(join(dir, "pending", "missing")), {});
	writeMark(path, { holder: thisProcess(), cwd: "/p", session: "/s.jsonl", at: 5 });
	assert.deepEqual(readMark(path), { holder: thisProcess(), cwd: "/p", session: "/s.jsonl", at: 5 });
});

test("strays: other sessions of this folder whose pi is gone", () => {
	const dir = dataDir();
	const mark = (id: string, m: object) => writeFileSync(join(dir, "pending", id), JSON.stringify(m));
	mark("dead-here", { holder: { pid: deadPid() }, cwd: "/p", session: "/a.jsonl" });
	mark("released-here", { cwd: "/p" });
	mark("alive-here", { holder: thisProcess(), cwd: "/p" });
	mark("dead-elsewhere", { holder: { pid: deadPid() }, cwd: "/q" });
	mark("mine", { holder: { pid: deadPid() }, cwd: "/p" });
	writeFileSync(join(dir, "pending", "old-empty"), "");
	writeFileSync(join(dir, "pending", "dead-here.lock"), "{}");
	const found = strays(dir, "/p", "mine")
		.map((s) => s.id)
		.sort();
	assert.deepEqual(found, ["dead-here", "released-here"]);
	assert.deepEqual(strays(join(dir, "nothing"), "/p", "x"), [], "no marks' folder: nothing, no error");
});

test("a mark's lock lets one pi decide at a time, and a dead pi's lock is taken over", () => {
	const dir = dataDir();
	const path = join(dir, "pending", "s1");
	assert.equal(
		withMarkLock(path, () => {
			assert.ok(existsSync(`${path}.lock`), "held while fn runs");
			assert.equal(
				withMarkLock(path, () => "twice"),
				undefined,
				"a second taker while a live one holds it gets nothing",
			);
			return "ran";
		}),
		"ran",
	);
	assert.equal(existsSync(`${path}.lock`), false, "released after");

	writeFileSync(`${path}.lock`, JSON.stringify({ pid: deadPid() }));
	assert.equal(
		withMarkLock(path, () => "taken over"),
		"taken over",
	);
	writeFileSync(`${path}.lock`, JSON.stringify({ pid: process.ppid }));
	assert.equal(
		withMarkLock(path, () => "no"),
		undefined,
		"a live pi's lock is left alone",
	);
	assert.match(readFileSync(`${path}.lock`, "utf8"), new RegExp(String(process.ppid)));
});
