// The fleet view's pure part: from what the service answered (`list`,
// `status`, `transcript`, `schedule list`) and a terminal width to the lines
// pi draws. Nothing here imports pi or talks to the service, so `node --test`
// renders it at any width (docs/fleet.md).

import { cancelled, type Envelope, type Item, type ListItem, oneLine, succeeded, toolRowText } from "./format.ts";

/** One run of a schedule as `schedule describe --json` answers (client.ScheduleRun; the fields the view reads). */
export interface ScheduleRun {
	id: string;
	/** The delegation or plan it started. */
	delegation_id?: string;
	status: string;
	/** When it started (RFC 3339). */
	fired: string;
	/** The start of its first task's output, or of its error. */
	summary?: string;
	error?: { code: string; message: string };
	/** A pi session of the folder has its result. */
	delivered?: boolean;
	/** Its result waits for a pi session of the folder while this is set and delivered is not. */
	result_id?: string;
}

/** One schedule as `schedule list --json` and `schedule describe --json` answer (client.ScheduleItem; the fields the view reads). */
export interface ScheduleItem {
	id: string;
	/** Its readable title: what it runs. */
	name?: string;
	note?: string;
	cwd?: string;
	/** "delegation" or "plan": what each fire starts. */
	kind?: string;
	/** When it fires, in the words it was made with ("every 2h", "cron 0 9 * * 1-5"). */
	spec?: string;
	timezone?: string;
	overlap?: string;
	catchup?: string;
	/** When it stops firing (RFC 3339). */
	end?: string;
	/** Only its failed runs are delivered. */
	quiet?: boolean;
	paused: boolean;
	/** While paused, when `schedule pause` paused it (RFC 3339; absent for a pause from the UI). */
	paused_since?: string;
	/** The next times it fires (RFC 3339); none while paused. */
	next_fires?: string[];
	/** How many runs it started; missed: fires later than the catch-up window; skipped: by the overlap policy. */
	fires?: number;
	missed?: number;
	skipped?: number;
	/** Its recent runs, newest first (describe only). */
	runs?: ScheduleRun[];
	ui_url?: string;
}

/** What the view lists: this session's runs, this folder's, and the folder's schedules. */
export interface FleetData {
	/** `list --parent-session <this session>`. */
	mine: ListItem[];
	/** `list --cwd <this folder>`: other sessions' runs of the folder, scheduled fires among them. */
	folder: ListItem[];
	schedules: ScheduleItem[];
}

/** pi-tui's width functions (utils.ts): the view measures columns, never string lengths. */
export interface TextKit {
	visibleWidth(text: string): number;
	truncateToWidth(text: string, maxWidth: number, ellipsis?: string, pad?: boolean): string;
	wrapTextWithAnsi(text: string, width: number): string[];
}

/** The colors the view takes from pi's theme (a Theme is one). */
export type Color = "accent" | "border" | "borderAccent" | "success" | "error" | "warning" | "muted" | "dim" | "text";

/** pi's theme as the view uses it: colors, bold, and the selected line's background. */
export interface Paint {
	fg(color: Color, text: string): string;
	bold(text: string): string;
	bg?(color: "selectedBg", text: string): string;
}

/** A paint with no styles: golden renders and print mode. */
export const PLAIN: Paint = { fg: (_c, t) => t, bold: (t) => t };

/** One line of the list: a run, a schedule, or how many earlier runs of a schedule are not listed ("more"; its id is the schedule's). */
export interface FleetRow {
	id: string;
	kind: "delegation" | "session" | "plan" | "schedule" | "more";
	title: string;
	agent?: string;
	/** The run's state (README glossary), or a schedule's "active" / "paused". */
	status: string;
	/** When it started, and for a closed run when it ended (ms since the epoch). */
	started?: number;
	ended?: number;
	/** A schedule's next fire (none while paused), when it fires, and how many runs it started. */
	next?: number;
	/** A paused schedule: when it was paused, if known. */
	since?: number;
	spec?: string;
	fires?: number;
	/** Whether this session started it, or another session of the folder (a schedule: the folder). */
	scope: "session" | "folder";
	/** How far under the run that started it (a delegation's task, a task's own delegation). */
	depth: number;
	/** The session a message goes to: a session's own ID (a one-task delegation's too). */
	session?: string;
	open: boolean;
	uiUrl?: string;
	/** The listed schedule it is listed under: one of its runs (and their tasks), or the count of its earlier runs. */
	schedule?: string;
}

/** The ID of the delegation that is a one-task delegation's session (api.OneTaskDelegationID). */
function oneTaskDelegation(sessionId: string): string {
	return `delegation-${sessionId}`;
}

function time(iso: string | undefined): number | undefined {
	if (!iso) return undefined;
	const t = Date.parse(iso);
	return Number.isNaN(t) ? undefined : t;
}

function runRow(r: ListItem, scope: FleetRow["scope"]): FleetRow {
	// A plan's steps are sessions whose IDs start with the plan's (`<plan ID>-<key>`).
	const plan = r.id.startsWith("plan-") && r.kind !== "session";
	// A one-task delegation is its session's workflow: listed as the session,
	// it is the delegation the model started.
	const oneTask = r.kind === "session" && r.delegation_id === oneTaskDelegation(r.id);
	const kind: FleetRow["kind"] = plan ? "plan" : r.kind === "session" && !oneTask ? "session" : "delegation";
	return {
		id: r.id,
		kind,
		title: r.name || r.description || (kind === "session" ? r.agent : undefined) || `${kind} ${shortId(r.id)}`,
		// A plan lists as its own agent: its steps' rows name theirs.
		agent: plan && r.agent === "plan" ? undefined : r.agent,
		status: r.status || r.execution_status,
		started: time(r.started),
		ended: time(r.closed),
		scope,
		depth: 0,
		session: r.kind === "session" ? r.id : undefined,
		open: r.open,
		uiUrl: r.ui_url,
	};
}

/** The parent session of the runs a schedule starts: this and the schedule's ID (api.ScheduleParentPrefix). */
const SCHEDULE_PARENT = "schedule:";

/** How many runs of a schedule the list shows, the newest; one row counts the earlier ones. */
export const SCHEDULE_RUNS_SHOWN = 3;

/**
 * When a schedule's run fired, as its row's title says it (local time):
 * 14:05 today, else 03-01 14:05, and the year when it is not this one's;
 * with seconds, 14:05:31 (for runs of one minute: a trigger's beside a fire).
 */
export function fireTime(t: number | undefined, now: number, seconds = false): string {
	if (t === undefined) return "-";
	const d = new Date(t);
	const n = new Date(now);
	const pad = (x: number) => String(x).padStart(2, "0");
	const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? `:${pad(d.getSeconds())}` : ""}`;
	if (d.toDateString() === n.toDateString()) return hm;
	const md = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
	return d.getFullYear() === n.getFullYear() ? `${md} ${hm}` : `${d.getFullYear()}-${md} ${hm}`;
}

/**
 * The list's rows: this session's runs, then the rest of the folder's, each
 * newest first with what a run started beneath it (a delegation's or a
 * plan's tasks, in the order they started; a task's own delegations), then
 * the folder's schedules, each with its latest runs beneath it. A
 * delegation of one task is one row with its task's session. now decides
 * how a run's fire time is written (today's without its date).
 */
export function fleetRows(data: FleetData, now = Date.now()): FleetRow[] {
	const mine = new Set(data.mine.map((r) => r.id));
	const runs = [...data.mine.map((r) => runRow(r, "session")), ...data.folder.filter((r) => !mine.has(r.id)).map((r) => runRow(r, "folder"))];
	const items = new Map([...data.mine, ...data.folder].map((r) => [r.id, r] as const));
	const byId = new Map(runs.map((r) => [r.id, r] as const));
	const parentOf = (row: FleetRow): string | undefined => {
		const r = items.get(row.id)!;
		const d = r.delegation_id;
		if (d && d !== row.id && d !== oneTaskDelegation(row.id) && byId.has(d)) return d;
		const p = r.parent_session_id;
		if (p && p !== row.id && byId.get(p)?.session) return p;
		return undefined;
	};
	const children = new Map<string, FleetRow[]>();
	const roots: FleetRow[] = [];
	for (const row of runs) {
		const p = parentOf(row);
		if (p) children.set(p, [...(children.get(p) ?? []), row]);
		else roots.push(row);
	}
	// A delegation of one task and that task's session are one piece of
	// work (a schedule's run, a send that resumed an ended session): one
	// row, the delegation's, whose message and result are the session's,
	// with what the session started beneath it. Its name is its one task's
	// (a delegation's name joins its tasks'): a delegation of several whose
	// other tasks have no session yet keeps its rows.
	const placed = new Set<string>();
	for (const row of runs) {
		const kids = children.get(row.id);
		if (row.kind !== "delegation" || row.session || kids?.length !== 1) continue;
		const [task] = kids;
		if (task.kind !== "session" || (items.get(row.id)!.name ?? "") !== (items.get(task.id)!.name ?? "")) continue;
		row.session = task.id;
		row.agent = task.agent || row.agent;
		children.set(row.id, children.get(task.id) ?? []);
		children.delete(task.id);
		placed.add(task.id);
	}
	const newest = (a: FleetRow, b: FleetRow) => (b.started ?? 0) - (a.started ?? 0);
	const oldest = (a: FleetRow, b: FleetRow) => (a.started ?? 0) - (b.started ?? 0);
	const walk = (into: FleetRow[], row: FleetRow, depth: number, scope: FleetRow["scope"], schedule?: string) => {
		if (placed.has(row.id)) return;
		placed.add(row.id);
		into.push({ ...row, depth, scope, ...(schedule !== undefined && { schedule }) });
		for (const c of (children.get(row.id) ?? []).sort(oldest)) walk(into, c, depth + 1, scope, schedule);
	};
	const hide = (row: FleetRow) => {
		if (placed.has(row.id)) return;
		placed.add(row.id);
		for (const c of children.get(row.id) ?? []) hide(c);
	};
	// A schedule's runs (their parent session is the schedule's), named by
	// the schedule and their fire time: the latest few beneath their
	// schedule, and one row for how many earlier ones there are. A deleted
	// schedule's runs stay in the folder's section, as few.
	const listed = new Map(data.schedules.map((s) => [s.id, s] as const));
	const fires = new Map<string, FleetRow[]>();
	for (const row of roots) {
		const p = items.get(row.id)!.parent_session_id;
		if (!p?.startsWith(SCHEDULE_PARENT)) continue;
		const id = p.slice(SCHEDULE_PARENT.length);
		fires.set(id, [...(fires.get(id) ?? []), row]);
	}
	const under = new Map<string, FleetRow[]>();
	const after = new Map<string, FleetRow>();
	for (const [id, group] of fires) {
		const sched = listed.get(id);
		const shown = group.sort(newest).slice(0, SCHEDULE_RUNS_SHOWN);
		// To the minute, unless two runs shown share one.
		const minutes = shown.map((r) => fireTime(r.started, now));
		const seconds = new Set(minutes).size < minutes.length;
		for (const r of group) r.title = `fired ${fireTime(r.started, now, seconds)} · ${sched?.name || id}`;
		const hidden = group.slice(SCHEDULE_RUNS_SHOWN);
		for (const r of hidden) hide(r);
		// The schedule counts every run it started, also those the listing no longer holds.
		const n = Math.max(hidden.length, (sched?.fires ?? 0) - shown.length);
		const more: FleetRow | undefined = hidden.length
			? {
					id,
					kind: "more",
					title: sched ? `… ${n} earlier run${n === 1 ? "" : "s"}` : `… ${n} earlier run${n === 1 ? "" : "s"} of ${id}`,
					status: "",
					scope: "folder",
					depth: sched ? 1 : 0,
					open: false,
					uiUrl: sched?.ui_url,
					...(sched && { schedule: id }),
				}
			: undefined;
		if (!sched) {
			if (more) after.set(shown[shown.length - 1].id, more);
			continue;
		}
		const rows: FleetRow[] = [];
		for (const r of shown) walk(rows, r, 1, "folder", id);
		if (more) rows.push(more);
		under.set(id, rows);
	}
	const out: FleetRow[] = [];
	for (const scope of ["session", "folder"] as const) {
		for (const r of roots.filter((r) => r.scope === scope).sort(newest)) {
			walk(out, r, 0, scope);
			const more = after.get(r.id);
			if (more) out.push(more);
		}
	}
	// Runs whose parents name each other in a ring (never written by the
	// service) are listed all the same.
	for (const r of runs) walk(out, r, 0, r.scope);
	for (const s of data.schedules) {
		out.push({
			id: s.id,
			kind: "schedule",
			title: s.name || s.note || s.id,
			// The agent's column says when it fires.
			agent: s.spec,
			spec: s.spec,
			fires: s.fires,
			status: s.paused ? "paused" : "active",
			next: s.paused ? undefined : time(s.next_fires?.[0]),
			since: s.paused ? time(s.paused_since) : undefined,
			scope: "folder",
			depth: 0,
			open: true,
			uiUrl: s.ui_url,
		});
	}
	return out.flatMap((r) => (r.kind === "schedule" ? [r, ...(under.get(r.id) ?? [])] : [r]));
}

/** A duration as the view shows it: 12s, 4m05s, 2h03m, 3d04h. */
export function duration(ms: number): string {
	const s = Math.max(0, Math.floor(ms / 1000));
	const pad = (n: number) => String(n).padStart(2, "0");
	if (s < 60) return `${s}s`;
	if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
	if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
	return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
}

/** How long ago, in the coarsest unit: 21s, 4m, 2h, 3d. */
function age(ms: number): string {
	const s = Math.max(0, Math.floor(ms / 1000));
	if (s < 60) return `${s}s`;
	if (s < 3600) return `${Math.floor(s / 60)}m`;
	if (s < 86400) return `${Math.floor(s / 3600)}h`;
	return `${Math.floor(s / 86400)}d`;
}

/**
 * A row's time: for how long it has run while it works ("for 1m15s", after
 * its state: "running for 1m15s"); how long ago it ended once its workflow
 * closed ("completed 40s ago"). A run that finished but stays open (a
 * session that waits for a message, a delegation for its parent's
 * acknowledgement) has no end time to tell: when it started, said so
 * ("started 40s ago"). A schedule's time to its next fire.
 */
export function rowTime(row: FleetRow, now: number): string {
	if (row.kind === "schedule") {
		// Paused: how long ago (it has no next fire).
		if (row.status === "paused") return row.since !== undefined ? `${age(now - row.since)} ago` : "-";
		return row.next !== undefined ? `in ${duration(row.next - now)}` : "-";
	}
	if (row.kind === "more") return "";
	if (row.started === undefined) return "-";
	if (row.ended !== undefined) return `${age(now - row.ended)} ago`;
	if (working(row.status)) return `for ${duration(now - row.started)}`;
	return `started ${age(now - row.started)} ago`;
}

/** Whether a run's state is one that still works (the widget counts these). */
export function working(status: string | undefined): boolean {
	return status === "running" || status === "queued";
}

const ICONS: Record<string, [Color, string]> = {
	running: ["accent", "●"],
	queued: ["muted", "○"],
	waiting_for_input: ["muted", "◌"],
	completed: ["success", "✓"],
	failed: ["error", "✗"],
	timed_out: ["error", "✗"],
	terminated: ["error", "✗"],
	cancelled: ["warning", "⊘"],
	active: ["accent", "↻"],
	paused: ["muted", "↻"],
};

/** A state's glyph, in its color. */
export function icon(status: string, paint: Paint): string {
	const [color, glyph] = ICONS[status] ?? ["muted", "·"];
	return paint.fg(color, glyph);
}

/** A state as the list's column shows it (the one long name shortened). */
function stateLabel(status: string): string {
	return status === "waiting_for_input" ? "waiting" : status;
}

/** The last characters of an ID, enough to tell runs apart (UUIDv7s share their leading time digits). */
export function shortId(id: string): string {
	return id.length > 13 ? `…${id.slice(-12)}` : id;
}

/** What the view needs to draw: the kit, the paint, the width, the clock. */
export interface Canvas {
	kit: TextKit;
	paint: Paint;
	width: number;
	now: number;
}

/** A line cut to width columns; padded to exactly width with pad. */
function fit(c: Canvas, text: string, width = c.width, pad = false): string {
	return c.kit.truncateToWidth(text, Math.max(0, width), "…", pad);
}

/** The view's top border with a title in it. */
export function titleBar(c: Canvas, title: string): string {
	const head = `─ ${title} `;
	const w = c.kit.visibleWidth(head);
	if (w >= c.width) return c.paint.fg("borderAccent", c.kit.truncateToWidth(head, c.width, "…"));
	return c.paint.fg("borderAccent", "─ ") + c.paint.bold(c.paint.fg("accent", title)) + " " + c.paint.fg("borderAccent", "─".repeat(c.width - w));
}

/** Wide terminals (this many columns and more) show each row's kind and ID too. */
const WIDE = 100;

/** One row of the list, cut to the width; selected rows are marked (and shaded where the theme can). */
export function rowLine(c: Canvas, row: FleetRow, selected: boolean): string {
	const wide = c.width >= WIDE;
	const cell = (text: string, w: number, right = false) => {
		const cut = c.kit.truncateToWidth(text, w, "…");
		const padding = " ".repeat(Math.max(0, w - c.kit.visibleWidth(cut)));
		return right ? padding + cut : cut + padding;
	};
	// The time's cell holds "started 23h ago", the longest it says.
	const more = row.kind === "more";
	const cells = wide
		? [cell(more ? "" : row.kind, 10), cell(row.agent ?? "", 12), cell(stateLabel(row.status), 10), cell(rowTime(row, c.now), 15, true), cell(more ? "" : shortId(row.id), 13)]
		: [cell(row.agent ?? "", 10), cell(stateLabel(row.status), 9), cell(rowTime(row, c.now), 15, true)];
	const right = cells.join("  ");
	const lead = selected ? "▸ " : "  ";
	const indent = "  ".repeat(row.depth);
	const titleWidth = c.width - 2 - 2 - c.kit.visibleWidth(right) - 2;
	// A paused schedule has no next fire: its line says how it fires again.
	const text = row.kind === "schedule" && row.status === "paused" ? `${row.title} · to resume: subagents schedule resume ${row.id}` : row.title;
	const title = fit(c, indent + (more ? c.paint.fg("dim", text) : text), titleWidth, true);
	const line = `${lead}${icon(row.status, c.paint)} ${selected ? c.paint.bold(title) : title}  ${c.paint.fg("muted", right)}`;
	// A shaded line is shaded to the edge.
	const shade = selected && c.paint.bg;
	const cut = fit(c, line, c.width, !!shade);
	return shade ? c.paint.bg!("selectedBg", cut) : cut;
}

/** A section's heading. */
function heading(c: Canvas, text: string): string {
	return fit(c, c.paint.fg("muted", c.paint.bold(` ${text}`)));
}

// A schedule's runs are listed beneath it (schedule set); a deleted
// schedule's stay in the folder's section.
const SECTIONS: Array<{ title: string; of: (r: FleetRow) => boolean }> = [
	{ title: "This session", of: (r) => r.kind !== "schedule" && r.schedule === undefined && r.scope === "session" },
	{ title: "This folder (other sessions, schedules' runs)", of: (r) => r.kind !== "schedule" && r.schedule === undefined && r.scope === "folder" },
	{ title: "Schedules of this folder", of: (r) => r.kind === "schedule" || r.schedule !== undefined },
];

/** The keys of each screen, as its last line shows them: in full where it fits, else short. */
export const LIST_KEYS = ["↑↓ select · enter open · s send · c cancel · t take result · u UI page · r refresh · esc close", "↑↓ · enter open · s send · c cancel · t take · u UI · r refresh · esc close"] as const;
export const DETAIL_KEYS = ["↑↓ task · s send · c cancel · t take result · u UI page · r refresh · esc back", "↑↓ task · s send · c cancel · t take · u UI · r refresh · esc back"] as const;

/** What the list screen shows. */
export interface ListScreen {
	rows: FleetRow[];
	selected: number;
	/** How many rows fit (the terminal's height less the view's other lines). */
	maxRows: number;
	/** Where the rows' window starts (kept by the caller so that it scrolls, not jumps). */
	offset: number;
	/** Set while the first answer is awaited. */
	loading?: boolean;
	/** A line about the last action: what it did, or why it failed. */
	notice?: { text: string; level: "info" | "error" };
	/** The parts that cannot be read now (the service stopped, say): shown until they can. */
	problems?: string[];
	/** The prompt line (a message being typed, a cancel to confirm), which takes the keys' place. */
	prompt?: string;
	folder: string;
}

/** The offset that keeps selected within a window of maxRows rows. */
export function scrollTo(selected: number, offset: number, maxRows: number, total: number): number {
	let o = Math.min(offset, Math.max(0, total - maxRows));
	if (selected < o) o = selected;
	if (selected >= o + maxRows) o = selected - maxRows + 1;
	return Math.max(0, o);
}

/** The list screen: its title, the rows by section, a notice, the keys. */
export function renderList(c: Canvas, s: ListScreen): string[] {
	const out = [titleBar(c, `Subagents · this session and ${s.folder}`)];
	if (s.loading) out.push(fit(c, c.paint.fg("muted", "  Asking the subagents service…")));
	else if (s.rows.length === 0) out.push(fit(c, c.paint.fg("muted", "  Nothing delegated from this session or this folder yet.")));
	const offset = scrollTo(s.selected, s.offset, s.maxRows, s.rows.length);
	const end = Math.min(s.rows.length, offset + s.maxRows);
	if (offset > 0) out.push(fit(c, c.paint.fg("dim", `  ↑ ${offset} more`)));
	let section = "";
	for (let i = offset; i < end; i++) {
		const row = s.rows[i];
		const sec = SECTIONS.find((x) => x.of(row))!.title;
		if (sec !== section) {
			out.push(heading(c, sec));
			section = sec;
		}
		out.push(rowLine(c, row, i === s.selected));
	}
	if (end < s.rows.length) out.push(fit(c, c.paint.fg("dim", `  ↓ ${s.rows.length - end} more`)));
	return [...out, ...foot(c, s.problems ?? [], s.notice, s.prompt, LIST_KEYS)];
}

// A notice (a URL, an error) is wrapped to at most this many lines, and so
// are the problems together: the rows keep the rest of the screen.
const NOTICE_LINES = 3;

/**
 * The lines above the keys: what cannot be read now (problems, in the
 * error color, as long as they hold), then what the last action said (a
 * notice). A notice never hides a problem.
 */
export function noticeLines(c: Canvas, problems: readonly string[], notice: ListScreen["notice"]): string[] {
	const out: string[] = [];
	const wrap = (text: string, color: Color) => c.kit.wrapTextWithAnsi(text, c.width - 1).slice(0, NOTICE_LINES).map((l) => fit(c, c.paint.fg(color, ` ${l}`)));
	if (problems.length) out.push(...wrap(problems.join("; "), "error"));
	if (notice) out.push(...wrap(notice.text, notice.level === "error" ? "error" : "accent"));
	return out;
}

function foot(c: Canvas, problems: readonly string[], notice: ListScreen["notice"], prompt: string | undefined, keys: readonly [string, string]): string[] {
	const out = noticeLines(c, problems, notice);
	const [full, short] = keys;
	const help = c.kit.visibleWidth(full) < c.width ? full : short;
	out.push(prompt !== undefined ? fit(c, prompt) : fit(c, c.paint.fg("dim", ` ${help}`)));
	return out;
}

/** What the detail screen shows: one run, as `status` answered, and its selected task's transcript. */
export interface DetailScreen {
	row: FleetRow;
	env?: Envelope;
	/** The selected task (an index into env.items). */
	task: number;
	/** The first task shown when they do not all fit (kept by the caller so that the tasks scroll, not jump). */
	offset?: number;
	/** The tail of the selected task's transcript, when read. */
	transcript?: string;
	/** How many lines the screen may use. */
	maxLines: number;
	notice?: ListScreen["notice"];
	prompt?: string;
	/** What could not be read of the run (its status). */
	error?: string;
}

// A task's last few tool calls say what it does now; its transcript, under
// the tasks, has the rest.
const DETAIL_TOOL_ROWS = 4;
// A task's last words, answer or question are flattened to one line of at
// most this many characters before the width cuts them: wider than any
// terminal, short enough that a long answer costs nothing to draw.
const LINE_CHARS = 200;
// When a run's tasks do not all fit, the selected task's transcript keeps at
// least this many lines (its heading and its last five): what the child did
// last stays in sight however many tasks the run has (up to 16).
const TRANSCRIPT_MIN_LINES = 6;
// A plan's steps take at most this share of the lines left for the run when
// not everything fits: the tasks beneath them are the live part.
const PLAN_SHARE = 3;

/** An item's state: a task between turns of a sticky session waits for input. */
function itemStatus(it: Item): string {
	if (!it.done) return it.status;
	if (succeeded(it)) return "completed";
	if (cancelled(it)) return "cancelled";
	return it.status === "completed" ? "failed" : it.status;
}

/** One task's lines: its head, its last tool calls, its last words (or question, answer, error), the runs it delegated. */
function taskBlock(c: Canvas, it: Item, marked: boolean): string[] {
	const block: string[] = [];
	const name = it.name || it.description || it.task_id;
	const st = itemStatus(it);
	block.push(` ${marked ? "▸" : " "} ${icon(st, c.paint)} ${c.paint.bold(name)} · ${it.agent} · ${stateLabel(st)} · ${duration(it.elapsed_ms)} · ${it.tool_count} tools · ${it.task_id}`);
	for (const r of (it.tool_rows ?? []).slice(-DETAIL_TOOL_ROWS)) block.push(c.paint.fg("muted", `     ${toolRowText(r)}`));
	if (!it.done && it.question) block.push(c.paint.fg("warning", `     ? asks (${it.question.reason}): ${oneLine(it.question.message, LINE_CHARS)}`));
	else if (!it.done && it.last_text) block.push(`     » ${oneLine(it.last_text, LINE_CHARS)}`);
	else if (it.done && it.error) block.push(c.paint.fg("error", `     ${oneLine(it.error.message, LINE_CHARS)}`));
	else if (it.done && it.output) block.push(`     ${oneLine(it.output, LINE_CHARS)}`);
	for (const n of it.nested ?? []) block.push(c.paint.fg("muted", `     ↳ ${icon(n.status || n.execution_status, c.paint)} ${n.name || n.id} · ${n.agent ?? ""} · ${n.status || n.execution_status}`));
	return block;
}

/**
 * The tasks shown when blocks of these heights do not all fit in room lines
 * (two of which go to the "more tasks" lines): from offset on, moved just
 * enough that the selected task is in the window, then filled with the
 * tasks after it and, at the end, before it. start..end, end exclusive.
 */
export function taskWindow(heights: number[], selected: number, offset: number, room: number): { start: number; end: number } {
	const n = heights.length;
	const total = heights.reduce((a, b) => a + b, 0);
	if (total <= room) return { start: 0, end: n };
	const avail = Math.max(1, room - 2);
	const sum = (a: number, b: number) => heights.slice(a, b).reduce((x, y) => x + y, 0);
	let start = Math.max(0, Math.min(offset, selected));
	while (start < selected && sum(start, selected + 1) > avail) start++;
	let end = selected + 1;
	// The selected task alone fills the room: it is shown cut.
	if (sum(start, end) > avail) return { start: selected, end };
	while (end < n && sum(start, end + 1) <= avail) end++;
	while (start > 0 && sum(start - 1, end) <= avail) start--;
	return { start, end };
}

/** The detail screen: the run, each task with its tool rows, last words, question and nested runs, the transcript's tail. */
export function renderDetail(c: Canvas, s: DetailScreen): string[] {
	return detailView(c, s).lines;
}

/** The detail screen's lines, and the first task they show (the caller keeps it as the next render's offset). */
export function detailView(c: Canvas, s: DetailScreen): { lines: string[]; offset: number } {
	const row = s.row;
	const out = [titleBar(c, `Subagents › ${row.title.startsWith(row.kind) ? row.title : `${row.kind} ${row.title}`}`)];
	const env = s.env;
	const status = env?.status || row.status;
	out.push(fit(c, ` ${icon(status, c.paint)} ${c.paint.bold(row.title)} · ${stateLabel(status)} · ${rowTime({ ...row, status }, c.now)} · ${row.id}`));
	if (s.error) out.push(fit(c, c.paint.fg("error", `   ${s.error}`)));
	if (!env) {
		if (!s.error) out.push(fit(c, c.paint.fg("muted", "   Asking the subagents service…")));
		return { lines: [...out, ...foot(c, [], s.notice, s.prompt, DETAIL_KEYS)], offset: 0 };
	}
	const planLines: string[] = [];
	if (env.plan) {
		const plan = env.plan;
		const done = plan.steps.filter((st) => st.state === "completed").length;
		planLines.push(c.paint.fg("muted", `   Plan ${plan.name ?? ""} · ${done}/${plan.steps.length} steps done${plan.attempt > 1 ? ` · attempt ${plan.attempt}` : ""}`));
		for (const st of plan.steps) {
			const bits = [st.agent ?? "", st.state, (st.round ?? 0) > 1 ? `round ${st.round}` : "", st.verdict ? `verdict ${st.verdict}` : ""].filter(Boolean);
			planLines.push(`   ${icon(st.state, c.paint)} ${[...(st.path ?? []), st.key].join("/")} · ${bits.join(" · ")}`);
		}
		if (plan.stopped) planLines.push(c.paint.fg("error", `   ✕ ${plan.stopped.code}: ${plan.stopped.message}`));
	}
	const list = env.items ?? [];
	const selected = Math.max(0, Math.min(s.task, list.length - 1));
	const blocks = list.map((it, i) => taskBlock(c, it, list.length > 1 && i === selected));
	const url = (list[selected] ?? list[0])?.ui_url || env.ui_url || row.uiUrl;
	const tail: string[] = [];
	const chosen = list[selected];
	if (chosen) {
		tail.push(c.paint.fg("muted", c.paint.bold(` Transcript of ${chosen.name || chosen.task_id} (its end)`)));
		const text = s.transcript?.trimEnd();
		const lines = text ? text.split("\n").filter((l) => l.trim() !== "") : [c.paint.fg("dim", "(reading…)")];
		tail.push(...lines.map((l) => `   ${l}`));
	}
	const footer = foot(c, [], s.notice, s.prompt, DETAIL_KEYS);
	const fixed = out.length + (url ? 1 : 0) + footer.length;
	const room = Math.max(0, s.maxLines - fixed);
	const all = planLines.length + blocks.reduce((a, b) => a + b.length, 0);
	let body: string[];
	let offset = 0;
	if (all + Math.min(tail.length, TRANSCRIPT_MIN_LINES) <= room) {
		body = [...planLines, ...blocks.flat()];
	} else {
		// Not everything fits: the transcript keeps its few lines, the plan
		// its share, and the tasks scroll to keep the selected one in sight.
		let keep = Math.min(tail.length, TRANSCRIPT_MIN_LINES, Math.max(0, room - 3));
		if (keep < 2) keep = 0;
		const bodyRoom = room - keep;
		const planCap = planLines.length ? Math.max(1, Math.floor(bodyRoom / PLAN_SHARE)) : 0;
		const plan =
			planLines.length <= planCap
				? planLines
				: planCap >= 2
					? [...planLines.slice(0, planCap - 1), c.paint.fg("dim", `   … ${planLines.length - planCap + 1} more lines of the plan`)]
					: planLines.slice(0, 1);
		const taskRoom = Math.max(0, bodyRoom - plan.length);
		const w = taskWindow(
			blocks.map((b) => b.length),
			selected,
			s.offset ?? 0,
			taskRoom,
		);
		offset = w.start;
		const shown = blocks.slice(w.start, w.end).flat();
		const more = (n: number, arrow: string) => c.paint.fg("dim", `  ${arrow} ${n} more task${n === 1 ? "" : "s"}`);
		const above = w.start > 0 ? [more(w.start, "↑")] : [];
		const below = w.end < blocks.length ? [more(blocks.length - w.end, "↓")] : [];
		body = [...plan, ...above, ...shown.slice(0, Math.max(1, taskRoom - above.length - below.length)), ...below];
	}
	const tailRoom = Math.max(0, room - body.length);
	const shownTail = tail.length && tailRoom >= 2 ? [tail[0], ...tail.slice(1).slice(-(tailRoom - 1))] : [];
	for (const l of [...body.slice(0, room), ...shownTail]) out.push(fit(c, l));
	if (url) out.push(fit(c, c.paint.fg("dim", ` UI ${url}`)));
	return { lines: [...out, ...footer], offset };
}

/** What the schedule screen shows: one schedule, as `schedule describe` answered. */
export interface ScheduleScreen {
	row: FleetRow;
	item?: ScheduleItem;
	maxLines: number;
	notice?: ListScreen["notice"];
	error?: string;
}

export const SCHEDULE_KEYS = ["u UI page · r refresh · esc back", "u UI · r refresh · esc back"] as const;

// A schedule's next fires shown: when it fires next, and the rhythm after.
const NEXT_FIRES = 3;

/** The schedule screen: when it fires, its policies, how often it ran, and its recent runs with their results. */
export function renderSchedule(c: Canvas, s: ScheduleScreen): string[] {
	const row = s.row;
	const it = s.item;
	const out = [titleBar(c, `Subagents › schedule ${row.title}`)];
	const status = it ? (it.paused ? "paused" : "active") : row.status;
	const spec = it?.spec ?? row.spec;
	out.push(fit(c, ` ${icon(status, c.paint)} ${c.paint.bold(row.title)} · ${status}${spec ? ` · ${spec}` : ""} · ${row.id}`));
	if (s.error) out.push(fit(c, c.paint.fg("error", `   ${s.error}`)));
	const footer = foot(c, [], s.notice, undefined, SCHEDULE_KEYS);
	if (!it) {
		if (!s.error) out.push(fit(c, c.paint.fg("muted", "   Asking the subagents service…")));
		return [...out, ...footer];
	}
	const facts: string[] = [];
	const policies = [`overlap ${it.overlap ?? "skip"}`, `catch-up ${it.catchup ?? "-"}`, it.quiet ? "quiet (only failures are delivered)" : "", it.end ? `ends ${it.end}` : ""].filter(Boolean);
	// Its folder last: usually the view's own, and the longest to cut.
	facts.push(`   Runs a ${it.kind ?? "delegation"} · ${policies.join(" · ")}${it.timezone ? ` · times in ${it.timezone}` : ""}${it.cwd ? ` · in ${it.cwd}` : ""}`);
	const since = it.paused ? time(it.paused_since) : undefined;
	if (it.note) facts.push(c.paint.fg("muted", `   ${it.paused ? `Paused${since !== undefined ? ` ${age(c.now - since)} ago` : ""}: ` : "Note: "}${oneLine(it.note, LINE_CHARS)}`));
	const fired = [`Fired ${it.fires ?? 0} time${it.fires === 1 ? "" : "s"}`, it.missed ? `${it.missed} missed` : "", it.skipped ? `${it.skipped} skipped by overlap` : ""].filter(Boolean).join(", ");
	const next = (it.next_fires ?? [])
		.slice(0, NEXT_FIRES)
		.map((t) => time(t))
		.filter((t): t is number => t !== undefined)
		.map((t) => `in ${duration(t - c.now)}`);
	facts.push(`   ${fired} · ${it.paused ? `paused: no next fire until \`subagents schedule resume ${it.id}\` (or ask pi to resume it)` : next.length ? `next ${next.join(", ")}` : "no next fire"}`);
	const runs = it.runs ?? [];
	const runLines = runs.map((r) => {
		const when = time(r.fired);
		const ago = when !== undefined ? `${age(c.now - when)} ago` : "-";
		const delivered = r.delivered ? " · delivered" : r.result_id ? " · waits for a pi session here" : "";
		const said = r.error ? r.error.message : r.summary;
		// Its words before its ID: the ID's end tells runs apart, and the width cuts from the right.
		return `   ${icon(r.status, c.paint)} ${ago} · ${stateLabel(r.status)}${delivered}${said ? ` · ${oneLine(said, LINE_CHARS)}` : ""}${r.delegation_id ? ` · ${shortId(r.delegation_id)}` : ""}`;
	});
	const heading = c.paint.fg("muted", c.paint.bold(runs.length ? " Recent runs (newest first)" : " No runs yet"));
	const fixed = out.length + (it.ui_url ? 1 : 0) + footer.length;
	const room = Math.max(0, s.maxLines - fixed);
	const body = [...facts, heading];
	const runRoom = Math.max(0, room - body.length);
	const shownRuns = runLines.length <= runRoom ? runLines : [...runLines.slice(0, Math.max(0, runRoom - 1)), c.paint.fg("dim", `  ↓ ${runLines.length - Math.max(0, runRoom - 1)} more runs`)];
	for (const l of [...body, ...shownRuns].slice(0, room)) out.push(fit(c, l));
	if (it.ui_url) out.push(fit(c, c.paint.fg("dim", ` UI ${it.ui_url}`)));
	return [...out, ...footer];
}

/** One running task as the widget shows it. */
export interface RunningTask {
	id: string;
	agent: string;
	name?: string;
	started: number;
}

/**
 * The widget's line: how many of this session's tasks run, which agents,
 * for how long (the longest first); no lines when none runs.
 */
export function renderWidget(c: Canvas, running: RunningTask[]): string[] {
	if (running.length === 0) return [];
	const p = c.paint;
	const list = [...running].sort((a, b) => a.started - b.started);
	const head = `${p.fg("accent", "●")} ${p.bold(`${list.length} subagent${list.length === 1 ? "" : "s"} running`)}`;
	const tasks = list.map((t) => `${p.fg("accent", t.agent || "default")}${t.name && t.name !== t.agent ? ` ${t.name}` : ""} ${p.fg("muted", duration(c.now - t.started))}`);
	const hint = p.fg("dim", "/subagents");
	const sep = p.fg("dim", " · ");
	// As many tasks as fit, then how many more.
	let shown = tasks.length;
	const line = (n: number) => [head, ...tasks.slice(0, n), ...(n < tasks.length ? [p.fg("muted", `+${tasks.length - n} more`)] : []), hint].join(sep);
	while (shown > 1 && c.kit.visibleWidth(line(shown)) > c.width) shown--;
	return [fit(c, line(shown))];
}

/** The last n non-empty lines of a transcript. */
export function transcriptTail(text: string, n: number): string {
	return text
		.split("\n")
		.filter((l) => l.trim() !== "")
		.slice(-n)
		.join("\n");
}
