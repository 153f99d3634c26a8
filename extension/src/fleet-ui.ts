// The `/subagents` view: a component pi shows with ctx.ui.custom, driven by
// the keyboard. It keeps the screen's state and asks a FleetSource for data
// and actions, so that a test drives it with keys and reads its renders
// (docs/fleet.md).

import type { Envelope } from "./format.ts";
import {
	type Canvas,
	type DetailScreen,
	detailView,
	type FleetData,
	type FleetRow,
	fleetRows,
	type ListScreen,
	noticeLines,
	type Paint,
	renderList,
	renderSchedule,
	type ScheduleItem,
	scrollTo,
	type TextKit,
	transcriptTail,
	working,
} from "./fleet-view.ts";

/** Where the view's data comes from and its actions go (fleet.ts: the subagents command). */
export interface FleetSource {
	/** The rows' data, and what could not be read (a part missing is no failure of the view). */
	list(): Promise<{ data: FleetData; problems: string[] }>;
	status(id: string): Promise<Envelope>;
	/** A schedule with its next fires and recent runs (`schedule describe ID`); undefined when it is gone. */
	schedule(id: string): Promise<ScheduleItem | undefined>;
	/** A session's transcript (`transcript ID`). */
	transcript(sessionId: string): Promise<string>;
	/** Sends a message to a session; answers what happened, in a line. */
	send(sessionId: string, message: string): Promise<string>;
	/** Cancels a run; answers what happened, in a line. */
	cancel(id: string): Promise<string>;
	/** Puts a session's output into the conversation; answers what happened, in a line. */
	take(sessionId: string, label: string): Promise<string>;
	/** Shows or opens a page of the Temporal UI; answers what happened, in a line. */
	open(url: string): Promise<string>;
}

/** pi's keybindings as the view reads them (the injected KeybindingsManager). */
export interface KeyReader {
	matches(data: string, action: "tui.select.up" | "tui.select.down" | "tui.select.pageUp" | "tui.select.pageDown" | "tui.select.confirm" | "tui.select.cancel"): boolean;
}

/** A single-line text input (pi-tui's Input). */
export interface LineInput {
	onSubmit?: (value: string) => void;
	onEscape?: () => void;
	focused: boolean;
	handleInput(data: string): void;
	render(width: number): string[];
}

/** pi-tui as the view uses it. */
export interface ViewKit extends TextKit {
	Input: new (options?: { prompt?: string }) => LineInput;
	/** A printable key sent in the Kitty keyboard protocol's form (CSI u), decoded. */
	decodeKittyPrintable?(data: string): string | undefined;
}

export interface ViewOptions {
	source: FleetSource;
	kit: ViewKit;
	paint: Paint;
	keys: KeyReader;
	/** The folder's name, for the title. */
	folder: string;
	/** The terminal's rows: the view never draws more than fit. */
	rows: () => number;
	requestRender: () => void;
	/** Ends the view (ctx.ui.custom's done). */
	close: () => void;
	now?: () => number;
	/** Runs fn every ms until the returned stop is called (tests: by hand). */
	every?: (ms: number, fn: () => void) => () => void;
}

// The view redraws every second while something it shows runs: elapsed
// times are shown to the second. A redraw asks the service nothing.
const TICK_MS = 1000;
// How often the open list asks the service again while one of its rows
// runs: new and ended runs show within this, at one visibility query each.
const LIST_REFRESH_MS = 3000;
// How often an open run is asked for its state while it runs: its tool rows
// and last words are the live part of the screen.
const DETAIL_REFRESH_MS = 2000;
// A transcript is read by a workflow on the worker (ReadSession): read
// again only when the task moved on, and at most this often.
const TRANSCRIPT_REFRESH_MS = 5000;
// How many transcript lines are kept for the screen's tail.
const TRANSCRIPT_LINES = 40;
// Lines the view leaves to pi around it (the chat's last lines, the footer).
const MARGIN_ROWS = 6;

/** An open run: what the detail screen shows, and when it was last asked. */
type DetailState = Omit<DetailScreen, "maxLines" | "notice" | "prompt"> & {
	offset: number;
	/** When the transcript and the status were last read. */
	readAt: number;
	statusAt: number;
	/** The task's progress at the last transcript read: read again when it moves. */
	mark: string;
};

/** An open schedule: its describe, and when it was last asked. */
type ScheduleState = { row: FleetRow; item?: ScheduleItem; error?: string; askedAt: number };

type Pending = { kind: "send"; session: string; name: string; input: LineInput } | { kind: "cancel"; id: string; name: string };

function defaultEvery(ms: number, fn: () => void): () => void {
	const t = setInterval(fn, ms);
	// The view never holds pi open by itself.
	t.unref?.();
	return () => clearInterval(t);
}

export class FleetView {
	private readonly o: ViewOptions;
	private rows: FleetRow[] = [];
	private selected = 0;
	private offset = 0;
	private loading = true;
	/** What the last action said: until the next action, or the screen changes. */
	private notice: ListScreen["notice"];
	/** The parts of the list that could not be read at the last ask: until they can. */
	private problems: string[] = [];
	private pending: Pending | undefined;
	private detail: DetailState | undefined;
	private sched: ScheduleState | undefined;
	private listAt = 0;
	private asking = false;
	private closed = false;
	private readonly stop: () => void;
	private focusedState = false;

	constructor(o: ViewOptions) {
		this.o = o;
		this.stop = (o.every ?? defaultEvery)(TICK_MS, () => this.tick());
		void this.refreshList();
	}

	private now(): number {
		return this.o.now?.() ?? Date.now();
	}

	/** Focusable: the message input shows the terminal's cursor while the view has focus. */
	get focused(): boolean {
		return this.focusedState;
	}
	set focused(v: boolean) {
		this.focusedState = v;
		if (this.pending?.kind === "send") this.pending.input.focused = v;
	}

	private canvas(width: number): Canvas {
		return { kit: this.o.kit, paint: this.o.paint, width, now: this.now() };
	}

	private maxLines(): number {
		return Math.max(8, this.o.rows() - MARGIN_ROWS);
	}

	render(width: number): string[] {
		const c = this.canvas(width);
		const prompt = this.promptLine(width);
		if (this.sched) return renderSchedule(c, { ...this.sched, maxLines: this.maxLines(), notice: this.notice });
		if (this.detail) {
			const d = detailView(c, { ...this.detail, maxLines: this.maxLines(), notice: this.notice, prompt });
			this.detail.offset = d.offset;
			return d.lines;
		}
		// Title, three headings at most, the scroll marks, the problems and the notice, the keys.
		const maxRows = Math.max(3, this.maxLines() - 7 - noticeLines(c, this.problems, this.notice).length);
		this.offset = scrollTo(this.selected, this.offset, maxRows, this.rows.length);
		return renderList(c, {
			rows: this.rows,
			selected: this.selected,
			maxRows,
			offset: this.offset,
			loading: this.loading,
			notice: this.notice,
			problems: this.problems,
			prompt,
			folder: this.o.folder,
		});
	}

	private promptLine(width: number): string | undefined {
		const p = this.pending;
		if (!p) return undefined;
		if (p.kind === "send") return ` ${p.input.render(Math.max(10, width - 1))[0] ?? ""}`;
		return ` ${this.o.paint.fg("warning", `Cancel ${p.name}? y to cancel it, any other key to keep it`)}`;
	}

	invalidate(): void {
		/* every render draws from the state: nothing is cached */
	}

	dispose(): void {
		this.closed = true;
		this.stop();
	}

	private redraw(): void {
		if (!this.closed) this.o.requestRender();
	}

	private say(text: string, level: "info" | "error" = "info"): void {
		this.notice = { text, level };
		this.redraw();
	}

	/** The clock's beat: redraws while something runs, and asks the service again when it is time. */
	tick(): void {
		if (this.closed) return;
		const now = this.now();
		const sc = this.sched;
		if (sc) {
			// A run of it under way is the live part; the times to the next fires tick.
			this.redraw();
			const live = (sc.item?.runs ?? []).some((r) => working(r.status));
			if (live && !this.asking && now - sc.askedAt >= DETAIL_REFRESH_MS) void this.refreshSchedule();
			return;
		}
		const d = this.detail;
		if (d) {
			const live = !d.env || !d.env.done;
			if (live) this.redraw();
			if (live && !this.asking && now - d.statusAt >= DETAIL_REFRESH_MS) void this.refreshDetail();
			return;
		}
		if (!this.rows.some((r) => working(r.status))) return;
		this.redraw();
		if (!this.asking && now - this.listAt >= LIST_REFRESH_MS) void this.refreshList();
	}

	private async refreshList(): Promise<void> {
		this.asking = true;
		this.listAt = this.now();
		try {
			const { data, problems } = await this.o.source.list();
			// A schedule's row and the count of its earlier runs share its ID.
			const keep = this.rows[this.selected];
			this.rows = fleetRows(data, this.now());
			const at = keep ? this.rows.findIndex((r) => r.id === keep.id && r.kind === keep.kind) : -1;
			this.selected = at >= 0 ? at : Math.min(this.selected, Math.max(0, this.rows.length - 1));
			// A part that can be read again has no problem any more.
			this.problems = problems;
		} catch (e) {
			this.problems = [(e as Error).message];
		} finally {
			this.loading = false;
			this.asking = false;
			this.redraw();
		}
	}

	private async refreshDetail(): Promise<void> {
		const d = this.detail;
		if (!d) return;
		this.asking = true;
		d.statusAt = this.now();
		try {
			const env = await this.o.source.status(d.row.id);
			if (this.detail !== d) return;
			d.env = env;
			d.error = undefined;
			d.task = Math.min(d.task, Math.max(0, (env.items ?? []).length - 1));
			await this.readTranscript(d);
		} catch (e) {
			if (this.detail === d) d.error = (e as Error).message;
		} finally {
			this.asking = false;
			this.redraw();
		}
	}

	/** Reads the selected task's transcript when the task moved on since the last read, at most every TRANSCRIPT_REFRESH_MS. */
	private async readTranscript(d: DetailState, force = false): Promise<void> {
		const it = d.env?.items?.[d.task];
		if (!it) return;
		const mark = `${it.task_id}:${it.turn ?? 0}:${it.tool_count}:${it.event_count ?? 0}:${it.done}`;
		if (!force && mark === d.mark) return;
		if (!force && d.transcript !== undefined && this.now() - d.readAt < TRANSCRIPT_REFRESH_MS) return;
		d.mark = mark;
		d.readAt = this.now();
		try {
			const text = await this.o.source.transcript(it.task_id);
			if (this.detail === d) d.transcript = transcriptTail(text, TRANSCRIPT_LINES);
		} catch (e) {
			if (this.detail === d) d.transcript = `(${(e as Error).message})`;
		}
	}

	private async refreshSchedule(): Promise<void> {
		const sc = this.sched;
		if (!sc) return;
		this.asking = true;
		sc.askedAt = this.now();
		try {
			const item = await this.o.source.schedule(sc.row.id);
			if (this.sched !== sc) return;
			sc.item = item;
			sc.error = item ? undefined : `Schedule ${sc.row.id} is gone (deleted)`;
		} catch (e) {
			if (this.sched === sc) sc.error = (e as Error).message;
		} finally {
			this.asking = false;
			this.redraw();
		}
	}

	private open(row: FleetRow): void {
		this.notice = undefined;
		if (row.kind === "more") {
			// The earlier runs of a schedule: its screen lists the recent ones.
			const sched = this.rows.find((r) => r.kind === "schedule" && r.id === row.schedule);
			if (sched) return this.open(sched);
			this.say(`Its schedule ${row.id} is deleted: \`subagents list --cwd .\` in this folder lists its runs`, "error");
			return;
		}
		if (row.kind === "schedule") {
			this.sched = { row, askedAt: 0 };
			this.redraw();
			void this.refreshSchedule();
			return;
		}
		this.detail = { row, task: 0, offset: 0, readAt: 0, statusAt: 0, mark: "" };
		this.redraw();
		void this.refreshDetail();
	}

	private back(): void {
		this.detail = undefined;
		this.sched = undefined;
		this.notice = undefined;
		this.redraw();
		void this.refreshList();
	}

	/** A key typed as text: plain, or in the Kitty protocol's form. */
	private letter(data: string): string | undefined {
		if (data.length === 1) return data;
		return this.o.kit.decodeKittyPrintable?.(data);
	}

	handleInput(data: string): void {
		const p = this.pending;
		if (p?.kind === "send") {
			p.input.handleInput(data);
			this.redraw();
			return;
		}
		if (p?.kind === "cancel") {
			this.pending = undefined;
			if (this.letter(data) === "y") void this.act(() => this.o.source.cancel(p.id), true);
			else this.say(`${p.name} keeps running`);
			return;
		}
		const k = this.o.keys;
		if (this.sched) return this.scheduleInput(data);
		const d = this.detail;
		const count = d ? (d.env?.items ?? []).length : this.rows.length;
		const move = (to: number) => {
			if (count === 0) return;
			const next = Math.max(0, Math.min(count - 1, to));
			if (d) {
				if (next !== d.task) {
					d.task = next;
					d.transcript = undefined;
					void this.readTranscript(d, true).then(() => this.redraw());
				}
			} else this.selected = next;
			this.redraw();
		};
		const current = d ? d.task : this.selected;
		const page = Math.max(1, this.maxLines() - 10);
		if (k.matches(data, "tui.select.up")) return move(current - 1);
		if (k.matches(data, "tui.select.down")) return move(current + 1);
		if (k.matches(data, "tui.select.pageUp")) return move(current - page);
		if (k.matches(data, "tui.select.pageDown")) return move(current + page);
		if (k.matches(data, "tui.select.cancel")) {
			if (d) this.back();
			else this.o.close();
			return;
		}
		if (k.matches(data, "tui.select.confirm")) {
			const row = this.rows[this.selected];
			if (!d && row) this.open(row);
			return;
		}
		switch (this.letter(data)) {
			// vi's keys, as pi-subagents' inspector has them.
			case "k":
				return move(current - 1);
			case "j":
				return move(current + 1);
			case "q":
				if (d) this.back();
				else this.o.close();
				return;
			case "s":
				return this.startSend();
			case "c":
				return this.startCancel();
			case "t":
				return this.take();
			case "u":
				return this.openPage();
			case "r":
				if (d) d.mark = "";
				return this.ask(() => (d ? this.refreshDetail() : this.refreshList()));
		}
	}

	/** A key on an open schedule: back, ask again, its UI page; it has no message, result or cancel of its own. */
	private scheduleInput(data: string): void {
		const sc = this.sched!;
		const k = this.o.keys;
		const key = this.letter(data);
		if (k.matches(data, "tui.select.cancel") || key === "q") return this.back();
		switch (key) {
			case "r":
				return this.ask(() => this.refreshSchedule());
			case "u":
				return this.openPage();
			case "s":
			case "t":
			case "c":
				return this.say(scheduleRefusal(sc.row, key), "error");
		}
	}

	/** Asks again now, saying so until the answer is on the screen. */
	private ask(refresh: () => Promise<void>): void {
		const asking = { text: "Asking again…", level: "info" as const };
		this.notice = asking;
		this.redraw();
		void refresh().then(() => {
			// The answer is on the screen: the line has said its part.
			if (this.notice === asking) this.notice = undefined;
			this.redraw();
		});
	}

	/** The session a message, a take or a page goes to: the selected task, else the selected row's session. */
	private target(): { session?: string; name: string; url?: string; schedule?: FleetRow } | undefined {
		const sc = this.sched;
		if (sc) return { name: sc.row.title, url: sc.item?.ui_url || sc.row.uiUrl, schedule: sc.row };
		const d = this.detail;
		if (d) {
			const it = d.env?.items?.[d.task];
			if (!it) return { name: d.row.title, url: d.env?.ui_url || d.row.uiUrl };
			return { session: it.task_id, name: it.name || it.description || it.task_id, url: it.ui_url || d.env?.ui_url };
		}
		const row = this.rows[this.selected];
		if (!row) return undefined;
		return { session: row.session, name: row.title, url: row.uiUrl, schedule: row.kind === "schedule" || row.kind === "more" ? row : undefined };
	}

	private startSend(): void {
		const t = this.target();
		if (!t) return;
		if (t.schedule) {
			this.say(scheduleRefusal(t.schedule, "s"), "error");
			return;
		}
		if (!t.session) {
			this.say(`${t.name} has several tasks: open it (enter) and choose the task to send to`, "error");
			return;
		}
		const input = new this.o.kit.Input({ prompt: `Message to ${t.name}: ` });
		input.focused = this.focusedState;
		const session = t.session;
		input.onSubmit = (value) => {
			this.pending = undefined;
			if (!value.trim()) {
				this.say("Nothing sent");
				return;
			}
			void this.act(() => this.o.source.send(session, value), true);
		};
		input.onEscape = () => {
			this.pending = undefined;
			this.say("Nothing sent");
		};
		this.pending = { kind: "send", session, name: t.name, input };
		this.notice = { text: "enter sends, esc drops the message", level: "info" };
		this.redraw();
	}

	private startCancel(): void {
		const d = this.detail;
		let id: string | undefined;
		let name: string;
		if (d) {
			const list = d.env?.items ?? [];
			// A plan is cancelled as a whole; a delegation's task alone when it has several.
			const one = d.row.kind !== "plan" && list.length > 1 ? list[d.task] : undefined;
			id = one ? one.task_id : d.row.id;
			name = one ? one.name || one.task_id : d.row.title;
		} else {
			const row = this.rows[this.selected];
			if (!row) return;
			if (row.kind === "schedule" || row.kind === "more") {
				this.say(scheduleRefusal(row, "c"), "error");
				return;
			}
			id = row.id;
			name = row.title;
		}
		this.pending = { kind: "cancel", id, name };
		this.notice = undefined;
		this.redraw();
	}

	private take(): void {
		const t = this.target();
		if (!t) return;
		if (t.schedule) {
			this.say(scheduleRefusal(t.schedule, "t"), "error");
			return;
		}
		if (!t.session) {
			this.say(`${t.name} has several tasks: open it (enter) and choose the task whose result to take`, "error");
			return;
		}
		const session = t.session;
		void this.act(() => this.o.source.take(session, t.name), false);
	}

	private openPage(): void {
		const t = this.target();
		if (!t?.url) {
			this.say("No Temporal UI page is known for it (the service's UI is off?)", "error");
			return;
		}
		const url = t.url;
		void this.act(() => this.o.source.open(url), false);
	}

	/** Runs an action, says how it went, and with refresh asks for the new state. */
	private async act(run: () => Promise<string>, refresh: boolean): Promise<void> {
		this.say("…");
		try {
			this.say(await run());
		} catch (e) {
			this.say((e as Error).message, "error");
		}
		if (!refresh || this.closed) return;
		if (this.detail) {
			this.detail.mark = "";
			await this.refreshDetail();
		} else await this.refreshList();
	}
}

/** Why s, t or c does nothing on a schedule, and what does. */
function scheduleRefusal(row: FleetRow, key: "s" | "t" | "c"): string {
	if (row.kind === "more") {
		const act = key === "s" ? "send to" : key === "t" ? "take the result of" : "cancel";
		return `The earlier runs of schedule ${row.id} are not listed here: ${act} one of the runs listed above it, or one by its ID with \`subagents\`; enter on this row shows the schedule's recent runs`;
	}
	if (key === "c" && row.status === "paused") return `${row.id} is a paused schedule: it fires again once resumed (\`subagents schedule resume ${row.id}\`), or goes with \`subagents schedule delete ${row.id}\`; a run of it, listed beneath it, is cancelled`;
	if (key === "c") return `${row.title} is a schedule: it is paused or deleted, not cancelled (\`subagents schedule pause ${row.id}\`); a run of it, listed beneath it, is cancelled`;
	const what = key === "s" ? "takes no message" : "has no result of its own";
	return `${row.title} is a schedule: it ${what}; its latest runs are listed beneath it, and enter on it shows them (\`subagents schedule describe ${row.id}\`)`;
}
