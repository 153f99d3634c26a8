// The task tool's op "schedule": a delegation or plan on a timer, through
// `subagents schedule` (docs/schedules.md). A schedule belongs to the
// folder it was made in: its runs start there with no pi open, and their
// results come to the next pi session started there (delivery.ts).

import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type SubagentsCli, SubagentsError } from "./cli.ts";
import type { Envelope, ErrorInfo } from "./format.ts";
import { alive, type Holder, isThisProcess } from "./liveness.ts";
import { dataDir } from "./service.ts";

/** The `schedule` parameter's description: the whole of its help, paid on every request. */
export const SCHEDULE_HELP =
	"schedule op: {action: create|list|describe|pause|resume|trigger|update|delete, id, name, at (10m or RFC3339: once)|every (2h)|cron|calendar (hour=9 dow=mon-fri), timezone, overlap: skip|buffer_one|cancel_other|allow_all, catchup (1h|none), end, note, quiet (deliver failures only), tasks [{agent,prompt}] or agent+prompt, or plan (doc or saved name)+args}. Runs here with no pi open; results reach the next session here";

/** One run of a schedule (client.ScheduleRun). */
export interface ScheduleRunView {
	id: string;
	result_id?: string;
	delegation_id?: string;
	status: string;
	/** When it fired (in a claim: the time it stood for). */
	fired: string;
	scheduled?: string;
	/** In a claim: when it ended and left its result. */
	ended?: string;
	summary?: string;
	error?: ErrorInfo;
	delivered?: boolean;
	claimed_by?: string;
	holder?: { pid: number; start?: string; host?: string };
	/** In a claim this session won: the run's result, as `status` gives it. */
	result?: Envelope;
	ui_url?: string;
}

/** One schedule (client.ScheduleItem). */
export interface ScheduleItemView {
	id: string;
	name?: string;
	note?: string;
	cwd?: string;
	kind?: string;
	spec: string;
	timezone?: string;
	overlap: string;
	catchup: string;
	end?: string;
	quiet?: boolean;
	paused: boolean;
	/** While paused, when `schedule pause` paused it (absent for a pause from the UI). */
	paused_since?: string;
	/** The next fires; none while paused. */
	next_fires?: string[];
	fires: number;
	missed?: number;
	skipped?: number;
	/** In a claim's answer: its runs whose results are still to come (it may be deleted already). */
	running?: number;
	runs?: ScheduleRunView[];
	ui_url?: string;
}

/** The schedules of an envelope (`schedule` answers carry them). */
export function schedulesOf(env: Envelope): ScheduleItemView[] {
	return (env as Envelope & { schedules?: ScheduleItemView[] }).schedules ?? [];
}

/**
 * The folder a schedule belongs to, as the command names it: the real path
 * (links resolved), so that a pi started through a linked path and the
 * command run there agree on the folder's mark and its results. A folder
 * that cannot be resolved stays as given.
 */
export function scheduleFolder(cwd: string): string {
	try {
		return realpathSync(cwd);
	} catch {
		return cwd;
	}
}

/**
 * The mark of a folder that has schedules (cli/schedule.go writes it too):
 * <data dir>/scheduled/<sha256 of the folder>. A session started there
 * asks for the results of scheduled runs only when it is there.
 */
export function scheduledMark(dir: string, cwd: string): string {
	return join(dir, "scheduled", createHash("sha256").update(cwd).digest("hex").slice(0, 32));
}

/** Marks cwd as a folder with schedules. */
export function markScheduled(dir: string, cwd: string): void {
	const path = scheduledMark(dir, cwd);
	mkdirSync(join(dir, "scheduled"), { recursive: true, mode: 0o700 });
	writeFileSync(path, JSON.stringify({ cwd }), { mode: 0o600 });
}

// Which pi sessions were open in a folder, and when: a scheduled run's
// result says truly whether one was open there when the run ended (results
// reach a session only when it starts, or starts the service, so a session
// open all along gets none; delivery.ts). Each top-level pi writes
// <data dir>/open/<pid>-<start>: its process and, per session it opened,
// the folder, the session, and since when, then until when at its close. A
// pi killed leaves no end: it was open from its start for all we know.

/** One session a pi had open in a folder (ms since the epoch). */
export interface OpenSpan {
	cwd: string;
	session: string;
	since: number;
	until?: number;
}

export interface OpenRecord {
	holder: Holder;
	spans: OpenSpan[];
}

/** A record older than this (closed, or of a pi gone) is removed: no result waits longer (a delegation's ack TTL, 30 days). */
const OPEN_RECORD_KEEP_MS = 31 * 24 * 3600_000;

/**
 * How often the records are swept: every top-level pi writes one, so a
 * sweep at each start would read a month of them (hundreds of files, 10 ms
 * here after a few hundred runs) on pi's start path; a day late is nothing
 * against a month kept.
 */
const OPEN_SWEEP_EVERY_MS = 24 * 3600_000;

/** The file whose time says when the records were last swept (a dot name: no record's). */
const SWEPT = ".swept";

function openDir(dir: string): string {
	return join(dir, "open");
}

function openRecordPath(dir: string, h: Holder): string {
	return join(openDir(dir), `${h.pid}-${h.start ?? "0"}`);
}

function readOpenRecord(path: string): OpenRecord | undefined {
	try {
		const r = JSON.parse(readFileSync(path, "utf8")) as OpenRecord;
		return r && typeof r === "object" && r.holder && Array.isArray(r.spans) ? r : undefined;
	} catch {
		return undefined;
	}
}

/**
 * Notes that process holder has session open in folder cwd from at on (or,
 * with no session, that it closed the one it had, at at), and, once a day,
 * removes the records of pis gone long ago. A failure to write (a data dir
 * that cannot be written, where no schedule mark can be either) is
 * ignored: it must never stop pi.
 */
export function noteOpen(dir: string, holder: Holder, at: number, open?: { cwd: string; session: string }): void {
	try {
		mkdirSync(openDir(dir), { recursive: true, mode: 0o700 });
		const path = openRecordPath(dir, holder);
		const rec = readOpenRecord(path) ?? { holder, spans: [] };
		for (const sp of rec.spans) sp.until ??= at;
		if (open) rec.spans.push({ ...open, since: at });
		const tmp = `${path}.tmp`;
		writeFileSync(tmp, JSON.stringify(rec), { mode: 0o600 });
		renameSync(tmp, path);
	} catch {
		/* the record stays as it was */
		return;
	}
	sweepOpenRecords(dir, at);
}

/**
 * Removes the records whose last time is older than OPEN_RECORD_KEEP_MS
 * before at, of pis no longer alive: at most once per OPEN_SWEEP_EVERY_MS
 * (the time of SWEPT), and only the files last written that long ago are
 * read (a record is written whole at each open and close, so its file's
 * time is no earlier than its last time).
 */
function sweepOpenRecords(dir: string, at: number): void {
	const swept = join(openDir(dir), SWEPT);
	try {
		if (at - statSync(swept).mtimeMs < OPEN_SWEEP_EVERY_MS) return;
	} catch {
		/* never swept */
	}
	let names: string[];
	try {
		writeFileSync(swept, "", { mode: 0o600 });
		const when = new Date(at);
		utimesSync(swept, when, when);
		names = readdirSync(openDir(dir));
	} catch {
		return; // the records stay until the next sweep
	}
	for (const name of names) {
		if (name.startsWith(".")) continue;
		const other = join(openDir(dir), name);
		try {
			if (statSync(other).mtimeMs >= at - OPEN_RECORD_KEEP_MS) continue;
			// A record half written a month ago is its pi's, killed while it wrote.
			if (name.endsWith(".tmp")) {
				unlinkSync(other);
				continue;
			}
			const r = readOpenRecord(other);
			const last = Math.max(0, ...(r?.spans ?? []).map((sp) => sp.until ?? sp.since));
			if (r && !isThisProcess(r.holder) && last < at - OPEN_RECORD_KEEP_MS && !alive(r.holder)) unlinkSync(other);
		} catch {
			/* gone meanwhile (another pi's sweep), or not ours to remove: the next sweep looks again */
		}
	}
}

/** The records of open sessions in data dir dir (read once for a look's results). */
export function openRecords(dir: string): OpenRecord[] {
	let names: string[];
	try {
		names = readdirSync(openDir(dir)).filter((n) => !n.startsWith(".") && !n.endsWith(".tmp"));
	} catch {
		return [];
	}
	return names.map((n) => readOpenRecord(join(openDir(dir), n))).filter((r): r is OpenRecord => r !== undefined);
}

/**
 * Who had a session open in folder cwd at time t, by records: "this"
 * (session me), "another", "none", or undefined when a pi killed before t
 * (whose end is not known) may still have had one open then.
 */
export function openAt(records: OpenRecord[], cwd: string, me: string, t: number): "this" | "another" | "none" | undefined {
	let found: "this" | "another" | "none" | undefined = "none";
	for (const r of records) {
		for (const sp of r.spans) {
			if (sp.cwd !== cwd || sp.since > t) continue;
			if (sp.until === undefined && !alive(r.holder)) {
				if (found === "none") found = undefined;
				continue;
			}
			if (sp.until !== undefined && sp.until < t) continue;
			if (sp.session === me) return "this";
			found = "another";
		}
	}
	return found;
}

/** Where this pi keeps its marks: the local service's data dir, else the default one. */
export function marksDir(cli: SubagentsCli): string {
	return cli.options.local?.dataDir ?? dataDir(cli.options.env ?? process.env);
}

/** The actions the model may take; claim and ack are the delivery's own. */
const ACTIONS = new Set(["create", "list", "describe", "pause", "resume", "trigger", "update", "delete"]);

/** Runs one schedule action; its envelope and the text the model reads. */
export async function scheduleOp(cli: SubagentsCli, ctx: ExtensionContext, schedule: unknown): Promise<{ env: Envelope; text: string }> {
	if (!schedule || typeof schedule !== "object" || Array.isArray(schedule)) throw new SubagentsError("INVALID_INPUT", "schedule needs an object with an action");
	const req = schedule as Record<string, unknown>;
	if (typeof req.action !== "string" || !ACTIONS.has(req.action)) {
		throw new SubagentsError("INVALID_INPUT", `schedule.action must be one of ${[...ACTIONS].join(", ")}`);
	}
	const folder = scheduleFolder(ctx.cwd);
	const env = await cli.call("schedule", [], [], { cwd: folder, ...req });
	if (req.action === "create") {
		try {
			// The command marks the folder where it runs; so does this pi, where it looks.
			markScheduled(marksDir(cli), folder);
		} catch {
			/* the command's own mark stands */
		}
	}
	return { env, text: scheduleText(req.action, env) };
}

/** What the model reads of a schedule answer. */
export function scheduleText(action: string, env: Envelope): string {
	const items = schedulesOf(env);
	if (action === "list") {
		if (items.length === 0) return "No schedules in this folder.";
		return [`${items.length} schedule(s) in this folder:`, ...items.map((s) => `- ${oneLine(s)}`)].join("\n");
	}
	if (action === "describe") return items.map(describe).join("\n\n");
	const lines = [env.text ?? ""];
	for (const s of items) if (action !== "delete") lines.push(oneLine(s));
	return lines.filter(Boolean).join("\n");
}

/**
 * That s is paused, since when and why, and how it fires again: a paused
 * schedule has no next fire (an older service's answer may list some).
 */
function pausedFact(s: ScheduleItemView): string {
	const why = [s.paused_since ? `since ${s.paused_since}` : "", s.note ?? ""].filter(Boolean).join(": ");
	return `paused${why ? ` (${why})` : ""}: no fires until resumed (action "resume", id "${s.id}")`;
}

function oneLine(s: ScheduleItemView): string {
	const facts = [s.spec, s.paused ? pausedFact(s) : s.next_fires?.[0] ? `next ${s.next_fires[0]}` : ""];
	const last = s.runs?.[0];
	if (last) facts.push(`last run ${last.status}`);
	return `${s.id}${s.name ? ` "${s.name}"` : ""}: ${facts.filter(Boolean).join(", ")}`;
}

function describe(s: ScheduleItemView): string {
	const lines = [
		oneLine(s),
		`runs a ${s.kind ?? "delegation"} in ${s.cwd ?? "?"}; overlap ${s.overlap}, catchup ${s.catchup}${s.end ? `, ends ${s.end}` : ""}${s.quiet ? ", quiet (only failures are delivered)" : ""}`,
		`fired ${s.fires} time(s)${s.missed ? `, ${s.missed} missed` : ""}${s.skipped ? `, ${s.skipped} skipped by overlap` : ""}`,
	];
	if (s.note && !s.paused) lines.push(`note: ${s.note}`);
	if (s.next_fires?.length && !s.paused) lines.push(`next: ${s.next_fires.slice(0, 3).join(", ")}`);
	for (const r of s.runs ?? []) {
		const delivered = r.delivered ? ", delivered" : r.result_id ? ", waiting for a pi session here" : "";
		lines.push(`- ${r.fired} ${r.status}${r.delegation_id ? ` ${r.delegation_id}` : ""}${delivered}${r.summary ? `: ${r.summary}` : ""}`);
	}
	return lines.join("\n");
}
