// Which pi holds a parent session's results: the marks in <data dir>/pending/.
//
// A parent session that delegates writes a mark named for its session ID
// (delivery.ts): its next start looks for its results only when the mark is
// there. The mark also says which pi holds the session now (its pid and the
// process's start time, so that a pid the system gave to another process
// later does not count), the folder and the session file. A mark whose
// holder is gone (killed, crashed, or closed with work still running) is a
// session whose results wait for nobody: another pi started in the same
// folder says so and can take them (/subagents-adopt).

import { closeSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

/** A process, named so that a pid reused for another process does not match. */
export interface Holder {
	pid: number;
	/** The process's start time as /proc/<pid>/stat says it (clock ticks since boot); absent where there is no /proc. */
	start?: string;
}

/** What a session's mark holds. An empty mark (an older extension's) holds nothing but its existence. */
export interface Mark {
	/** The pi that holds the session's results now; absent once it let them go (closed). */
	holder?: Holder;
	/** The folder the session delegated from. */
	cwd?: string;
	/** The session file, for `pi --session`. */
	session?: string;
	/** When the session last delegated (ms since the epoch). */
	at?: number;
}

/** Where the marks live in a data dir. */
export function pendingDir(dataDir: string): string {
	return join(dataDir, "pending");
}

/** Whether s can name a mark (a pi session ID): nothing that leaves the folder. */
export function markName(s: string): boolean {
	return /^[A-Za-z0-9_-]+$/.test(s);
}

/**
 * A process's start time from /proc/<pid>/stat (field 22, after the
 * command name, which may itself hold spaces and parentheses); undefined
 * where there is no /proc or no such process.
 */
export function processStart(pid: number): string | undefined {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
		// fields[0] is field 3 (state): field 22 is fields[19].
		return fields[19] || undefined;
	} catch {
		return undefined;
	}
}

let self: Holder | undefined;

/** This process as a holder. */
export function thisProcess(): Holder {
	self ??= { pid: process.pid, start: processStart(process.pid) };
	return self;
}

/** Whether h is this process. */
export function isThisProcess(h: Holder | undefined): boolean {
	const me = thisProcess();
	return h !== undefined && h.pid === me.pid && (h.start ?? "") === (me.start ?? "");
}

/**
 * Whether the holder still runs: its pid answers signal 0 and, where /proc
 * tells, started when the holder did. Without /proc a reused pid counts as
 * alive (its results wait until that process ends).
 */
export function alive(h: Holder | undefined): boolean {
	if (!h || !Number.isInteger(h.pid) || h.pid <= 0) return false;
	try {
		process.kill(h.pid, 0);
	} catch (e) {
		// EPERM: a process of another user has the pid, so the holder (ours) is gone.
		return false;
	}
	if (!h.start) return true;
	const now = processStart(h.pid);
	return now === undefined || now === h.start;
}

/** A mark's content; {} for an empty, unreadable or foreign one. */
export function readMark(path: string): Mark {
	let text: string;
	try {
		text = readFileSync(path, "utf8");
	} catch {
		return {};
	}
	try {
		const m = JSON.parse(text) as Mark;
		return m && typeof m === "object" ? m : {};
	} catch {
		return {};
	}
}

/** Writes a mark whole (a reader never sees half of one): a file beside it, renamed over it. */
export function writeMark(path: string, mark: Mark): void {
	const tmp = `${path}.${process.pid}.tmp`;
	writeFileSync(tmp, JSON.stringify(mark), { mode: 0o600 });
	renameSync(tmp, path);
}

/**
 * Runs fn while holding the mark's lock (<mark>.lock, created exclusively):
 * two pis that look at one mark at once (two adopting it, or one adopting
 * and one resuming its session) decide one after the other. A lock whose
 * holder is gone is taken over. Undefined when another live pi holds it.
 */
export function withMarkLock<T>(path: string, fn: () => T): T | undefined {
	const lock = `${path}.lock`;
	for (let tries = 0; tries < 2; tries++) {
		let fd: number;
		try {
			fd = openSync(lock, "wx", 0o600);
		} catch (e) {
			if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
			let owner: Holder | undefined;
			try {
				owner = JSON.parse(readFileSync(lock, "utf8")) as Holder;
			} catch {
				/* being written, or left half-written by a process that died */
			}
			if (owner && alive(owner)) return undefined;
			try {
				unlinkSync(lock);
			} catch {
				/* another pi took it over first */
			}
			continue;
		}
		try {
			writeSync(fd, JSON.stringify(thisProcess()));
			closeSync(fd);
			return fn();
		} finally {
			try {
				unlinkSync(lock);
			} catch {
				/* gone already */
			}
		}
	}
	return undefined;
}

/** A session whose results may wait for nobody. */
export interface Stray {
	/** The parent session's ID (the mark's name). */
	id: string;
	path: string;
	mark: Mark;
}

/**
 * The marks of other sessions that delegated from cwd and that no live pi
 * holds: their results wait for nobody. Reads the marks' folder only (no
 * process is asked, nothing is started); an empty mark (an older
 * extension's) names no folder and is left to its own session.
 */
export function strays(dataDir: string, cwd: string, except: string): Stray[] {
	const dir = pendingDir(dataDir);
	let names: string[];
	try {
		names = readdirSync(dir);
	} catch {
		return [];
	}
	const out: Stray[] = [];
	for (const id of names) {
		if (id === except || !markName(id)) continue;
		const path = join(dir, id);
		const mark = readMark(path);
		if (mark.cwd !== cwd || alive(mark.holder)) continue;
		out.push({ id, path, mark });
	}
	return out;
}
