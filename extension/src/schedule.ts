// The task tool's op "schedule": a delegation or plan on a timer, through
// `subagents schedule` (docs/schedules.md). A schedule belongs to the
// folder it was made in: its runs start there with no pi open, and their
// results come to the next pi session started there (delivery.ts).

import { createHash } from "node:crypto";
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type SubagentsCli, SubagentsError } from "./cli.ts";
import type { Envelope, ErrorInfo } from "./format.ts";
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
	fired: string;
	scheduled?: string;
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
