// The fleet inside pi (docs/fleet.md): a widget above the editor while this
// session's subagents run, and `/subagents`, a view of this session's and
// this folder's delegations, sessions, plans and schedules that opens a run,
// sends to a child, cancels, takes a result and opens the Temporal UI. In
// print, JSON and RPC modes `/subagents` answers with the list as text
// (answer.ts).

import { spawn } from "node:child_process";
import { basename } from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { answer } from "./answer.ts";
import { type SubagentsCli, SubagentsError } from "./cli.ts";
import type { Delivery } from "./delivery.ts";
import { type Envelope, listLine } from "./format.ts";
import { FleetView, type FleetSource, type KeyReader } from "./fleet-ui.ts";
import type { FleetData, Paint, RunningTask, ScheduleItem } from "./fleet-view.ts";
import { FleetWidget, ourProgress, ourResult } from "./fleet-widget.ts";

type Tui = typeof import("@earendil-works/pi-tui");

/** What the fleet needs of the extension that registers it. */
export interface FleetDeps {
	/** A client of the service; passive: one that does not start it. */
	cli: (passive?: boolean) => SubagentsCli;
	delivery: Delivery;
	/** pi's TUI module, as the entry hands it over (index.ts); without it, the one beside this extension. */
	loadTui?: () => Promise<Tui>;
}

/** customType of a result taken into the conversation from the view. */
export const TAKEN_MESSAGE_TYPE = "subagents-taken";

/** The widget's key in pi's widget area. */
const WIDGET_KEY = "subagents-fleet";

// Not a literal import: the bundle must not carry its own copy of pi's TUI
// (the entry's loadTui gives pi's; this is for an entry that does not).
const PI_TUI = "@earendil-works/pi-tui";

/** The runs of an envelope, or none when the call failed (passive: nothing runs without a service). */
async function runsOf(call: Promise<Envelope>): Promise<Envelope["runs"]> {
	return (await call).runs ?? [];
}

/**
 * The folder's schedules (`schedule list --cwd`). No service running is no
 * schedules (none fires without it; the list says the service is down);
 * any other failure, a refusal among them, is a problem the view names.
 */
export async function schedulesOf(cli: SubagentsCli, cwd: string): Promise<{ schedules: ScheduleItem[]; problem?: string }> {
	try {
		const env = await cli.call<Envelope & { schedules?: ScheduleItem[] }>("schedule", [], [], { action: "list", cwd });
		return { schedules: env.schedules ?? [] };
	} catch (e) {
		if (e instanceof SubagentsError && e.notRunning) return { schedules: [] };
		const code = e instanceof SubagentsError && e.code ? `${e.code}: ` : "";
		return { schedules: [], problem: `schedules: ${code}${(e as Error).message}` };
	}
}

/** The text `/subagents` answers with outside the terminal UI: this session's runs, one a line, and what the extension waits for. */
export async function listText(cli: SubagentsCli, parent: string, waiting: string[]): Promise<string> {
	let lines: string[];
	try {
		const runs = (await cli.call("list", ["--parent-session", parent])).runs ?? [];
		lines = runs.length ? runs.map(listLine) : ["No delegations from this session yet."];
	} catch (e) {
		// Looking starts no service: none running, nothing runs.
		if (!(e instanceof SubagentsError && e.notRunning)) throw e;
		lines = ["The subagents service is not running: nothing runs"];
	}
	if (waiting.length) lines.push(`Waiting in the background for: ${waiting.join(", ")}`);
	return lines.join("\n");
}

/** The command that opens a URL on this platform, when there is a desktop to open it on. */
function opener(): string[] | undefined {
	if (process.platform === "darwin") return ["open"];
	if (process.platform === "win32") return ["cmd", "/c", "start", ""];
	// A terminal with no display (ssh, CI) would get a text browser in pi's place.
	if (!process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return undefined;
	return ["xdg-open"];
}

function openUrl(url: string): Promise<string> {
	const cmd = opener();
	if (!cmd) return Promise.resolve(`Temporal UI: ${url}`);
	return new Promise((resolve) => {
		const child = spawn(cmd[0], [...cmd.slice(1), url], { detached: true, stdio: "ignore" });
		child.on("error", () => resolve(`Temporal UI: ${url} (could not open it: ${cmd[0]} failed)`));
		child.on("spawn", () => {
			child.unref();
			resolve(`Opened ${url}`);
		});
	});
}

/** The view's data and actions, through the subagents command. */
function source(pi: ExtensionAPI, deps: FleetDeps, ctx: ExtensionContext): FleetSource {
	const { cli, delivery } = deps;
	return {
		async list() {
			const problems: string[] = [];
			// Passive: looking starts no service; none running means nothing runs.
			const passive = cli(true);
			try {
				const [mine, folder, sched] = await Promise.all([
					runsOf(passive.call("list", ["--parent-session", delivery.parent(ctx)])),
					runsOf(passive.call("list", ["--cwd", ctx.cwd])).catch((e: Error) => {
						problems.push(`this folder's runs: ${e.message}`);
						return [];
					}),
					schedulesOf(passive, ctx.cwd),
				]);
				if (sched.problem) problems.push(sched.problem);
				const data: FleetData = { mine: mine ?? [], folder: folder ?? [], schedules: sched.schedules };
				return { data, problems };
			} catch (e) {
				if (e instanceof SubagentsError && e.notRunning) {
					return { data: { mine: [], folder: [], schedules: [] }, problems: ["The subagents service is not running: nothing runs"] };
				}
				throw e;
			}
		},
		// Looking (a run's state, its transcript, a schedule, a result to
		// take) starts no service; only send and cancel may, as the tools do.
		status: (id) => cli(true).call("status", [], [id]),
		async transcript(id) {
			return (await cli(true).call("transcript", [], [id])).text ?? "";
		},
		async schedule(id) {
			const env = await cli(true).call<Envelope & { schedules?: ScheduleItem[] }>("schedule", [], [], { action: "describe", id });
			return env.schedules?.[0];
		},
		async send(session, message) {
			// As the task tool's send: a session between turns or ended is
			// resumed by a delegation whose result comes back here.
			const env = await delivery.own(cli().call("send", [], [], { task_id: session, prompt: message, parent_session_id: delivery.delivering(ctx), deliver: true }));
			if (env.accepted_turn) {
				// A running task's next turn, which no delegation carries: its
				// answer is waited for here, and comes back as a background
				// result does.
				delivery.watchTurn(session, env.accepted_turn, ctx);
				return `Sent: it runs as turn ${env.accepted_turn} of ${session}, after the turn under way; its answer comes back here`;
			}
			if (env.delegation_id && !env.done) delivery.watch(env.delegation_id);
			return `Sent: ${session} goes on with it${env.delegation_id ? ` (${env.delegation_id}); its result comes back here` : ""}`;
		},
		async cancel(id) {
			const env = await cli().call("cancel", [], [id]);
			const it = env.items?.[0];
			const applied = env.cancel_applied ?? it?.cancel_applied;
			const prior = env.prior_status ?? it?.prior_status;
			return applied === false ? `${id} had ended already${prior ? ` (${prior})` : ""}: nothing to cancel` : `Cancelled ${id}${prior ? ` (it was ${prior})` : ""}`;
		},
		async take(session, label) {
			// A result is read, not made: no service running, there is none to take.
			const env = await cli(true).call("output", ["--full"], [session]);
			const text = env.text ?? "";
			if (!text.trim()) return `${label} has no output yet`;
			pi.sendMessage(
				{ customType: TAKEN_MESSAGE_TYPE, content: `Result of ${label} [${session}], taken with /subagents:\n\n${text}`, display: true, details: { sessionId: session } },
				// Into the conversation, for the next prompt; no turn of its own.
				{ triggerTurn: false },
			);
			return `Put the result of ${label} into the conversation (${text.length} characters)`;
		},
		open: openUrl,
	};
}

/** Whether the session's branch holds a result of this extension's tools (an earlier run of it delegated). */
function calledOurs(ctx: ExtensionContext): boolean {
	try {
		for (const e of ctx.sessionManager.getBranch() as Array<{ type?: string; message?: { role?: string; details?: unknown } }>) {
			if (e.type === "message" && e.message?.role === "toolResult" && ourResult(e.message.details)) return true;
		}
	} catch {
		/* no history to read: nothing of it runs */
	}
	return false;
}

/** The tasks of this session that run, for the widget. */
async function runningTasks(deps: FleetDeps, ctx: ExtensionContext): Promise<RunningTask[]> {
	const env = await deps.cli(true).call("list", ["--kind", "session", "--open", "--parent-session", deps.delivery.parent(ctx)]);
	return (env.runs ?? [])
		.filter((r) => r.status === "running" || r.status === "queued")
		.map((r) => ({ id: r.id, agent: r.agent ?? "", name: r.name, started: Date.parse(r.started) || Date.now() }));
}

/** Registers `/subagents` and the widget. */
export function registerFleet(pi: ExtensionAPI, deps: FleetDeps): void {
	let tui: Tui | undefined;
	const loadTui = async (): Promise<Tui> => (tui ??= await (deps.loadTui ?? (() => import(PI_TUI) as Promise<Tui>))());
	let widget: FleetWidget | undefined;
	// Whether this process saw a call of this extension's tools in this
	// session (one that delegates, or any other: a cheap over-estimate).
	let calledHere = false;
	// Whether the session's history, at its start, holds such a call: work
	// of an earlier run of it may still run.
	let calledBefore = false;

	pi.registerCommand("subagents", {
		description: "This session's and this folder's delegations, sessions, plans and schedules: open one, send, cancel, take a result",
		handler: async (_args, ctx: ExtensionContext) => {
			if (ctx.mode !== "tui") {
				// Print, JSON and RPC modes: the list as text.
				answer(pi, ctx, "subagents", await listText(deps.cli(true), deps.delivery.parent(ctx), deps.delivery.running()));
				return;
			}
			const kit = await loadTui();
			await ctx.ui.custom<void>((term, theme, keybindings, done) => {
				const keys: KeyReader = { matches: (data, action) => keybindings.matches(data, action) };
				return new FleetView({
					source: source(pi, deps, ctx),
					kit,
					paint: theme as Paint,
					keys,
					folder: basename(ctx.cwd) || ctx.cwd,
					rows: () => term.terminal.rows,
					requestRender: () => term.requestRender(),
					close: () => done(undefined),
				});
			});
			// What the view did (a send, a cancel) may have started or ended work.
			widget?.kick(true);
		},
	});

	pi.on("session_start", async (_event, ctx) => {
		widget?.dispose();
		widget = undefined;
		calledHere = false;
		calledBefore = false;
		// The widget is drawn in the terminal only.
		if (ctx.mode !== "tui") return;
		calledBefore = calledOurs(ctx);
		let kit: Tui;
		try {
			kit = await loadTui();
		} catch {
			return;
		}
		widget = new FleetWidget({
			source: { running: () => runningTasks(deps, ctx) },
			kit,
			waiting: () => deps.delivery.running().length > 0,
			// Cheap, and no service asked: a call of ours in this session,
			// now or in its history, or its mark that results may wait.
			started: () => calledHere || calledBefore || deps.delivery.mayHavePending(ctx),
			show: (factory) => {
				if (!factory) {
					ctx.ui.setWidget(WIDGET_KEY, undefined);
					return;
				}
				ctx.ui.setWidget(WIDGET_KEY, (term, theme) => {
					const w = factory(() => term.requestRender());
					return { render: (width: number) => w.render(width, theme as Paint), invalidate: () => {} };
				});
			},
		});
		// Work of an earlier run of this session may still run.
		widget.kick(true);
	});
	pi.on("tool_execution_update", (event) => {
		if (widget && ourProgress((event.partialResult as { details?: unknown } | undefined)?.details)) {
			calledHere = true;
			widget.callRunning(event.toolCallId);
		}
	});
	pi.on("tool_execution_end", (event) => {
		if (ourResult((event.result as { details?: unknown } | undefined)?.details)) calledHere = true;
		widget?.callEnded(event.toolCallId);
	});
	// A turn's end and the agent's settling are where background work is
	// started (async) or its results arrive: look once, and on while it
	// runs; the widget asks nothing unless this session started something
	// or waits for a background delegation.
	pi.on("turn_end", () => {
		widget?.kick();
	});
	pi.on("agent_settled", () => {
		widget?.kick();
	});
	pi.on("session_shutdown", () => {
		widget?.dispose();
		widget = undefined;
	});
}
