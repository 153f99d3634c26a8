// The widget above pi's editor while this session's subagents run: how
// many, which agents, for how long; gone when none runs (docs/fleet.md).
//
// It asks the service only while something of this session may run: a tool
// call of ours is under way (its live updates say so), the extension waits
// for a background delegation (Delivery.running()), or the last look found
// tasks running. Then it lists this session's open sessions every POLL_MS.
// Otherwise a turn's end (or the session's start) looks once, and only when
// this session has started something (a call of ours now or in its
// history, its mark that results may wait: checks that ask nothing); a
// session that never delegated asks nothing at all.

import { type Paint, type RunningTask, renderWidget, type TextKit } from "./fleet-view.ts";

/** Where the widget's tasks come from (fleet.ts: `list --parent-session <this session> --open`). */
export interface WidgetSource {
	running(): Promise<RunningTask[]>;
}

/** What draws the widget: pi's ctx.ui.setWidget, with a component or nothing. */
export type WidgetHost = (factory: ((requestRender: () => void) => { render(width: number, paint: Paint): string[] }) | undefined) => void;

export interface WidgetOptions {
	source: WidgetSource;
	kit: TextKit;
	/** Puts the widget up (a factory) or takes it down (undefined). */
	show: WidgetHost;
	/** Whether the extension waits for work of this session (Delivery.running()). */
	waiting: () => boolean;
	/** Whether this session has started anything that may still run; cheap: it asks no service. */
	started: () => boolean;
	now?: () => number;
	every?: (ms: number, fn: () => void) => () => void;
}

// The widget's elapsed times are shown to the second: it redraws every
// second while it is up (a redraw asks the service nothing).
const TICK_MS = 1000;
// How often the widget asks the service which tasks run while any may:
// one visibility query on the local socket; a task that starts or ends
// shows within this.
export const POLL_MS = 2000;

function defaultEvery(ms: number, fn: () => void): () => void {
	const t = setInterval(fn, ms);
	// The widget never holds pi open by itself.
	t.unref?.();
	return () => clearInterval(t);
}

/** The details of a tool update of this extension's tools: a delegation's live progress. */
export function ourProgress(details: unknown): boolean {
	if (!details || typeof details !== "object") return false;
	const d = details as Record<string, unknown>;
	return "envelope" in d || "windows" in d || d.contract_version === "task.v1";
}

/** The details of a result of this extension's tools: the task and delegate contracts', or the subagent tool's (a session's). */
export function ourResult(details: unknown): boolean {
	if (ourProgress(details)) return true;
	if (!details || typeof details !== "object") return false;
	const d = details as Record<string, unknown>;
	return d.mode === "single" && typeof d.sessionId === "string";
}

export class FleetWidget {
	private readonly o: WidgetOptions;
	private tasks: RunningTask[] = [];
	/** Tool calls of ours under way (by toolCallId). */
	private readonly calls = new Set<string>();
	private stopTick: (() => void) | undefined;
	private polledAt = 0;
	private polling = false;
	private up = false;
	private redraw: (() => void) | undefined;
	private closed = false;

	constructor(o: WidgetOptions) {
		this.o = o;
	}

	private now(): number {
		return this.o.now?.() ?? Date.now();
	}

	/** A tool call of ours sent live progress: something runs. */
	callRunning(toolCallId: string): void {
		if (this.calls.has(toolCallId)) return;
		this.calls.add(toolCallId);
		this.kick(true);
	}

	/** A tool call ended: what it ran has ended, or goes on in the background. */
	callEnded(toolCallId: string): void {
		if (this.calls.delete(toolCallId)) this.kick(true);
	}

	/**
	 * Something may have started or ended (a turn ended, a view closed):
	 * look, and keep looking while anything runs; unless this session
	 * started nothing and waits for nothing (cheap checks first).
	 */
	kick(now = false): void {
		if (this.closed) return;
		if (!this.busy() && !this.o.started()) return;
		if (now) this.polledAt = 0;
		if (!this.stopTick) this.stopTick = (this.o.every ?? defaultEvery)(TICK_MS, () => this.tick());
		this.tick();
	}

	private busy(): boolean {
		return this.calls.size > 0 || this.o.waiting() || this.tasks.length > 0;
	}

	/** The clock's beat: redraw the times, ask again when it is time, stop when nothing runs. */
	tick(): void {
		if (this.closed) return;
		if (this.up) this.redraw?.();
		if (!this.polling && this.now() - this.polledAt >= POLL_MS) void this.poll();
	}

	private async poll(): Promise<void> {
		this.polling = true;
		this.polledAt = this.now();
		try {
			this.tasks = await this.o.source.running();
		} catch {
			// No service (nothing runs), or it did not answer: the next beat asks again while busy.
			this.tasks = [];
		} finally {
			this.polling = false;
		}
		if (this.closed) return;
		this.place();
		if (!this.busy()) {
			this.stopTick?.();
			this.stopTick = undefined;
		}
	}

	/** Puts the widget up when tasks run, takes it down when none does. */
	private place(): void {
		if (this.tasks.length > 0 && !this.up) {
			this.up = true;
			this.o.show((requestRender) => {
				this.redraw = requestRender;
				return { render: (width, paint) => this.lines(width, paint) };
			});
		} else if (this.tasks.length === 0 && this.up) {
			this.up = false;
			this.redraw = undefined;
			this.o.show(undefined);
		} else this.redraw?.();
	}

	/** The widget's lines at width. */
	lines(width: number, paint: Paint): string[] {
		return renderWidget({ kit: this.o.kit, paint, width, now: this.now() }, this.tasks);
	}

	/** The session ended: no more looks, and the widget comes down. */
	dispose(): void {
		this.closed = true;
		this.stopTick?.();
		this.stopTick = undefined;
		if (this.up) this.o.show(undefined);
		this.up = false;
	}
}
