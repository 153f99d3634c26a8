// Delivery of delegation results into the parent session, exactly once.
//
// Every delegation the parent starts is a Temporal workflow that stays open
// until the parent acknowledges its results (`subagents ack`). A result
// counts as delivered once it is written in the parent's session file: as
// the tool result of the call that waited for it, or as a custom message
// when it arrived in the background or after a restart. Only then is it
// acknowledged, so a parent killed at any point gets each result on its
// next start, and never twice.

import { existsSync, mkdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { SubagentsError, type SubagentsCli } from "./cli.ts";
import { asking, deliveryText, type Envelope, type Item, type StrayReport, taskTree } from "./format.ts";
import { alive, isThisProcess, type Mark, markName, pendingDir, readMark, thisProcess, withMarkLock, writeMark } from "./liveness.ts";
import { noteOpen, openAt, openRecords, type ScheduleRunView, scheduledMark, scheduleFolder, schedulesOf } from "./schedule.ts";
import { dataDir as defaultDataDir } from "./service.ts";

/**
 * How long a folder's schedule mark stays although a look found neither
 * schedules nor results there: a schedule made a moment ago may not be
 * listed yet (Temporal's listing lags its writes by up to a second).
 */
const SCHEDULE_MARK_GRACE_MS = 60_000;

/**
 * Where a result comes from, which says whether it starts a model turn:
 * own, background work this process started (its model asked for it and
 * waits); earlier, work of this session started by an earlier run (a run
 * that was killed or ended first); adopted, work of another session that
 * nobody waited for, taken with /subagents-adopt; scheduled, the run of a
 * schedule of this folder (docs/schedules.md), which no session started.
 */
export type Origin = "own" | "earlier" | "adopted" | "scheduled";

/**
 * Whether a result of origin starts a model turn of its own: in the
 * terminal and RPC every result of this session does (the user sees it
 * come); in a print or JSON run only what this run's model started, since
 * anything else would be a turn nobody asked for after the run's answer.
 * An adopted result never does: the user took it to read it, and asks;
 * nor does a scheduled one: no session asked for it, and the model reads
 * it with the user's next prompt.
 */
export function startsTurn(origin: Origin, interactive: boolean): boolean {
	return origin === "own" || (origin === "earlier" && interactive);
}

/**
 * How long a retried nested child waits for its previous attempt's pi to
 * exit: the worker's kill grace (SIGTERM, then SIGKILL after 5 s) and a
 * loaded machine's slack.
 */
const previousAttemptExitMs = 8000;

/**
 * In a child that delegates (the worker set PI_SUBAGENT_NESTED), the
 * task's session ID the worker gave it; undefined elsewhere.
 */
export function nestedParent(env: NodeJS.ProcessEnv = process.env): string | undefined {
	if (env.PI_SUBAGENT_CHILD !== "1" || env.PI_SUBAGENT_NESTED !== "1") return undefined;
	return env.PI_SUBAGENT_PARENT_SESSION || undefined;
}

/** customType of the delivery messages in the parent session. */
export const RESULT_MESSAGE_TYPE = "subagents-result";

interface Entry {
	type: string;
	customType?: string;
	details?: { delegationId?: string; turn?: string };
	data?: { session?: string; turn?: number; gone?: boolean };
	message?: { role?: string; details?: { delegationIds?: string[] } };
}

/**
 * customType of the entry (pi.appendEntry: the model never reads it) that
 * records a message this session sent to a running task, whose answer, its
 * next turn, no delegation carries: the session waits for it (watchTurn).
 * gone: the task's session is gone, and the answer with it.
 */
export const TURN_SENT_TYPE = "subagents-turn-sent";

/** The key of a turn's answer delivered into a session: its task's session and the turn (a delegation's ID never holds "#"). */
export function turnKey(session: string, turn: number): string {
	return `${session}#${turn}`;
}

/** The answers of messages sent to running tasks that a session's branch holds (or gave up), and those it still waits for. */
export function sentTurns(entries: Entry[]): { delivered: Set<string>; pending: Array<{ session: string; turn: number }> } {
	const delivered = new Set<string>();
	const sent = new Map<string, { session: string; turn: number }>();
	for (const e of entries) {
		if (e.type === "custom_message" && e.customType === RESULT_MESSAGE_TYPE && e.details?.turn) delivered.add(e.details.turn);
		if (e.type !== "custom" || e.customType !== TURN_SENT_TYPE || !e.data?.session || !e.data.turn) continue;
		const key = turnKey(e.data.session, e.data.turn);
		if (e.data.gone) delivered.add(key);
		else sent.set(key, { session: e.data.session, turn: e.data.turn });
	}
	return { delivered, pending: [...sent].filter(([k]) => !delivered.has(k)).map(([, t]) => t) };
}

/** The delegation IDs whose results the session's branch holds. */
export function deliveredIds(entries: Entry[]): Set<string> {
	const ids = new Set<string>();
	for (const e of entries) {
		if (e.type === "message" && e.message?.role === "toolResult") {
			for (const id of e.message.details?.delegationIds ?? []) ids.add(id);
		} else if (e.type === "custom_message" && e.customType === RESULT_MESSAGE_TYPE && e.details?.delegationId) {
			ids.add(e.details.delegationId);
		}
	}
	return ids;
}

/** customType of the message that tells a parent's model a child's question waits. */
export const QUESTION_MESSAGE_TYPE = "subagents-question";

/** The key of a question in a session's messages: its task and its ID. */
export function questionKey(it: Item): string {
	return `${it.task_id}/${it.question?.id ?? ""}`;
}

/**
 * The draft of the message that tells the model a child's question waits
 * (docs/questions.md); intro says whose task it is.
 */
export function questionDraft(it: Item, intro: string) {
	return {
		type: "custom_message" as const,
		customType: QUESTION_MESSAGE_TYPE,
		content: `${intro}\n${taskTree(it)}`,
		display: true,
		details: { questionId: questionKey(it) },
	};
}

/** A delivery or question draft, sent as the custom message it describes. */
export function sendDraft(pi: ExtensionAPI, d: { customType: string; content: string; display: boolean; details: unknown }, options: Parameters<ExtensionAPI["sendMessage"]>[1]): void {
	pi.sendMessage({ customType: d.customType, content: d.content, display: d.display, details: d.details }, options);
}

/** The questions a session's branch has been told of (an earlier run of it included). */
export function toldInBranch(ctx: ExtensionContext): Set<string> {
	const told = new Set<string>();
	for (const e of ctx.sessionManager.getBranch() as Array<{ type: string; customType?: string; details?: { questionId?: string } }>) {
		if (e.type === "custom_message" && e.customType === QUESTION_MESSAGE_TYPE && e.details?.questionId) told.add(e.details.questionId);
	}
	return told;
}

/** What a delivered result of a scheduled run says of its schedule. */
export interface ScheduledFrom {
	schedule: string;
	/** The fire's workflow ID, when it fired and when it ended. */
	run: string;
	fired?: string;
	ended?: string;
	/**
	 * Which pi session was open in the folder when it ended (schedule.ts
	 * openAt): this one, another, none; absent when that is not known.
	 */
	open?: "this" | "another" | "none";
	resultId: string;
}

/** What the result of a scheduled run says first: which run, when, and whether a session was here then. */
export function scheduledIntro(s: ScheduledFrom): string {
	const when = [s.fired ? `fired at ${s.fired}` : "", s.ended ? `ended at ${s.ended}` : "ended"].filter(Boolean).join(" and ");
	// Results come to a session only when it starts (or starts the service):
	// a session open when the run ended took nothing then.
	const where = {
		none: " while no pi session was open here",
		this: " while this session was open (a folder's scheduled results come when a session starts, or starts the service)",
		another: " while another pi session was open here (a folder's scheduled results come when a session starts)",
	}[s.open ?? ""] ?? "";
	return `A scheduled run of schedule ${s.schedule} (${s.run}) ${when}${where}; its result:`;
}

/**
 * The draft of the message that delivers the answer of a message sent to a
 * running task: its next turn, which no delegation carries (watchTurn).
 */
export function turnDraft(env: Envelope, sent: { session: string; turn: number }) {
	const turn = env.items?.[0]?.turn ?? sent.turn;
	return {
		type: "custom_message" as const,
		customType: RESULT_MESSAGE_TYPE,
		content: deliveryText(env, `turn ${turn} of ${sent.session}: the answer to the message sent to it while it ran`),
		display: true,
		details: { turn: turnKey(sent.session, sent.turn), envelope: env },
	};
}

/**
 * The draft of a delivery message, for turn boundaries; adoptedFrom names
 * the session whose result it was, scheduled the schedule whose run it is.
 */
export function deliveryDraft(env: Envelope, adoptedFrom?: string, scheduled?: ScheduledFrom) {
	let text = deliveryText(env);
	if (adoptedFrom) text += `\n\n(Taken with /subagents-adopt from the earlier pi session ${adoptedFrom}, where nobody waited for it.)`;
	if (scheduled) text = `${scheduledIntro(scheduled)}\n\n${text}`;
	return {
		type: "custom_message" as const,
		customType: RESULT_MESSAGE_TYPE,
		content: text,
		display: true,
		details: { delegationId: env.delegation_id, envelope: env, ...(adoptedFrom && { adoptedFrom }), ...(scheduled && { scheduled }) },
	};
}


export class Delivery {
	private readonly pi: ExtensionAPI;
	private readonly cli: (passive?: boolean) => SubagentsCli;
	/** Delegations acknowledged by this process. */
	private readonly acked = new Set<string>();
	/** Background delegations this process waits for, by ID. */
	private readonly watchers = new Map<string, { abort: AbortController; done: Promise<void> }>();
	/** Finished results not yet in the session, with where they come from. */
	private readonly ready = new Map<string, { env: Envelope; origin: Origin }>();
	/**
	 * Questions of background tasks' children that this session has not
	 * been told of yet, by questionKey; told: those it has. A question
	 * needs the model's answer, so it is handed over as a result is.
	 */
	private readonly questions = new Map<string, Item>();
	private readonly told = new Set<string>();
	/** Where each watched delegation comes from. */
	private readonly origins = new Map<string, Origin>();
	/** Adopted delegations: the session each came from. */
	private readonly adoptedFrom = new Map<string, string>();
	/** Messages sent to running tasks whose answers this session waits for, by turnKey (watchTurn). */
	private readonly turns = new Map<string, { session: string; turn: number }>();
	/** Results of scheduled runs this session claimed, by delegation ID: where each waits to be acknowledged. */
	private readonly scheduledFrom = new Map<string, ScheduledFrom>();
	/** Sessions whose marks this process wrote by delegating: such a mark stays until its work is acknowledged. */
	private readonly delegatedHere = new Set<string>();
	/** The sessions whose marks this process holds: its own, and those whose results it adopted. */
	private readonly held = new Set<string>();
	/** Results handed to pi (drafts or messages) and not yet seen persisted. */
	private readonly handed = new Set<string>();
	/**
	 * Delegations this process started or continued: their results come
	 * back as the tool result of the call that waits for them, or through
	 * watch (async); a look for earlier results must not find them again.
	 */
	private readonly mine = new Set<string>();
	/** Starts and sends under way: a look for earlier results waits for them (see own). */
	private readonly starting = new Set<Promise<unknown>>();
	/** The look for earlier results under way: looks run one after another. */
	private resuming: Promise<void> = Promise.resolve();
	private readonly waiters: Array<() => void> = [];
	private parentId = "";
	private ctx: ExtensionContext | undefined;
	/** Set once the session shut down: nothing new is watched or delivered. */
	private closed = false;
	/** Whether this process noted a session open (opened): its close is noted at shutdown. */
	private openNoted = false;

	/** The local service's data dir, where this parent marks that it waits for results; undefined for a remote Temporal. */
	private readonly dataDir: () => string | undefined;

	constructor(pi: ExtensionAPI, cli: (passive?: boolean) => SubagentsCli, dataDir: () => string | undefined = () => undefined) {
		this.pi = pi;
		this.cli = cli;
		this.dataDir = dataDir;
	}

	/**
	 * The parent session ID every delegation records: pi's session, or in
	 * a child that delegates the task's session (nestedParent), so that
	 * what it starts is listed and cancelled under that task, and a run of
	 * it retried after a worker restart finds its results by that ID.
	 */
	parent(ctx: ExtensionContext): string {
		return nestedParent() ?? ctx.sessionManager.getSessionId();
	}

	/**
	 * The parent session ID for a delegation whose results come back here:
	 * it also marks, in the data dir, that this session waits for results,
	 * so that its next start looks for them (while the service runs: a
	 * look never starts it), and otherwise asks nothing.
	 */
	delivering(ctx: ExtensionContext): string {
		const id = this.parent(ctx);
		const marker = this.marker(id);
		if (marker) {
			try {
				mkdirSync(pendingDir(this.dataDir() as string), { recursive: true, mode: 0o700 });
				// This process holds the session's results from now on; a pi
				// that starts later in the folder sees it alive (liveness.ts).
				writeMark(marker, { holder: thisProcess(), cwd: ctx.cwd, session: ctx.sessionManager.getSessionFile(), at: Date.now() });
				this.delegatedHere.add(id);
				this.held.add(id);
			} catch (e) {
				// Without the mark a restart would not look for the results:
				// start nothing that could be lost.
				throw new SubagentsError("SERVICE_UNAVAILABLE", `cannot mark ${marker} (where a restarted pi looks for results): ${(e as Error).message}`);
			}
		}
		return id;
	}

	/** Whether this session may have results waiting (see delivering). */
	mayHavePending(ctx: ExtensionContext): boolean {
		const marker = this.marker(this.parent(ctx));
		return marker !== undefined && existsSync(marker);
	}

	/** Whether results of this folder's scheduled runs may wait for a session here (its schedule mark). */
	mayHaveScheduled(ctx: ExtensionContext): boolean {
		return nestedParent() === undefined && existsSync(scheduledMark(this.marksDir(), scheduleFolder(ctx.cwd)));
	}

	/** Where this pi keeps the schedule marks and the record of open sessions. */
	private marksDir(): string {
		return this.dataDir() ?? defaultDataDir(process.env);
	}

	/**
	 * Notes that this session is open in its folder from now on (a child's
	 * pi is no session of the folder): a scheduled run's result says
	 * whether a session was open there when the run ended (schedule.ts).
	 */
	opened(ctx: ExtensionContext, now = Date.now()): void {
		if (process.env.PI_SUBAGENT_CHILD === "1") return;
		noteOpen(this.marksDir(), thisProcess(), now, { cwd: scheduleFolder(ctx.cwd), session: ctx.sessionManager.getSessionId() });
		this.openNoted = true;
	}

	private marker(parentId: string): string | undefined {
		const dir = this.dataDir();
		return dir && markName(parentId) ? join(pendingDir(dir), parentId) : undefined;
	}

	/**
	 * Takes the session's mark for this process, unless another live pi
	 * holds it (the same session open in two pis, or its results adopted
	 * by a pi in its folder): then that pi gets them, and this one must not
	 * deliver them a second time. An empty mark (an older extension's) is
	 * filled in.
	 */
	private claim(marker: string, ctx: ExtensionContext): boolean {
		const taken = withMarkLock(marker, () => {
			if (!existsSync(marker)) return true;
			const m = readMark(marker);
			if (m.holder && !isThisProcess(m.holder) && alive(m.holder)) return false;
			writeMark(marker, { ...m, holder: thisProcess(), cwd: m.cwd ?? ctx.cwd, session: m.session ?? ctx.sessionManager.getSessionFile() });
			return true;
		});
		if (taken === true) this.held.add(this.parent(ctx));
		return taken === true;
	}

	/**
	 * claim, waiting in a nested child for the pi of its task's previous
	 * attempt to exit: the worker ends that pi before it runs the next
	 * attempt on the same session, but the pi may still be exiting when the
	 * next one starts, and its mark is then this attempt's to take (else
	 * the grandchild's result never reaches the retried child). A user's pi
	 * never waits: another live pi on its session is a real second holder.
	 */
	private async claimAfterPreviousAttempt(marker: string, ctx: ExtensionContext): Promise<boolean> {
		if (this.claim(marker, ctx)) return true;
		if (nestedParent() === undefined) return false;
		const deadline = Date.now() + previousAttemptExitMs;
		while (Date.now() < deadline) {
			await new Promise((r) => setTimeout(r, 100));
			if (this.claim(marker, ctx)) return true;
		}
		return false;
	}

	running(): string[] {
		return [...this.watchers.keys()];
	}

	/** How many delegations of origin are still waited for. */
	waitingFor(origin: Origin): number {
		return [...this.watchers.keys()].filter((id) => this.origins.get(id) === origin).length;
	}

	/** Waits until no delegation of origin is waited for any more (each has arrived, or its wait broke). */
	async settled(origin: Origin, signal?: AbortSignal): Promise<void> {
		while (this.waitingFor(origin) > 0 && !signal?.aborted) {
			await new Promise<void>((resolve) => {
				this.waiters.push(resolve);
				signal?.addEventListener("abort", () => resolve(), { once: true });
			});
		}
	}

	/**
	 * Marks the delegation a start or send of this process returns as its
	 * own. A look for earlier results that runs meanwhile (the service this
	 * very call started) waits for it, so that it never takes the new
	 * delegation for an earlier one and delivers its result a second time.
	 */
	async own(call: Promise<Envelope>): Promise<Envelope> {
		this.starting.add(call);
		try {
			const env = await call;
			if (env.delegation_id) this.mine.add(env.delegation_id);
			return env;
		} finally {
			this.starting.delete(call);
		}
	}

	/**
	 * On start or resume: acknowledge what the session already holds,
	 * deliver what finished while the parent was away, and wait in the
	 * background for what still runs. With the local service, only a
	 * session that marked itself waiting asks anything: any other has
	 * nothing to get, and its start makes no call. A remote Temporal keeps
	 * no marks and is asked each time. The look is passive: it asks only a
	 * service that runs already, since only a delegation or an explicit
	 * command starts the service (a stopped one stays stopped); the
	 * results wait in Temporal, and the look runs again when this pi starts
	 * the service (onServiceStarted) or at the session's next start.
	 */
	resume(ctx: ExtensionContext): Promise<void> {
		// One look at a time: pi's start and the start of the service (which
		// runs the look again, now that there is something to ask) may both
		// ask, and two looks at once would both find the same delegation.
		const next = this.resuming.then(async () => {
			// Results of this folder's scheduled runs are looked for
			// whatever the session's own look finds (or fails with).
			let failed: unknown;
			try {
				await this.resumeNow(ctx);
			} catch (e) {
				failed = e;
			}
			try {
				await this.scheduledNow(ctx);
			} catch (e) {
				failed ??= e;
			}
			if (failed !== undefined) throw failed;
		});
		this.resuming = next.catch(() => {});
		return next;
	}

	/**
	 * Claims, for this session, the results of this folder's scheduled runs
	 * that wait for a session (docs/schedules.md#results), and delivers them.
	 * The service decides each claim: when two pis start here at once, each
	 * result goes to one of them. A result another session claimed stays
	 * its own unless that session's pi (on this machine) is gone: then it is
	 * taken over (the service lets one pi do that). A result this session
	 * claimed before and already holds (a restart) is only acknowledged.
	 * A child that delegates takes none: its folder is its parent's.
	 */
	private async scheduledNow(ctx: ExtensionContext): Promise<void> {
		if (this.closed || nestedParent() !== undefined) return;
		// Only a folder that has (had) schedules asks anything.
		if (!this.mayHaveScheduled(ctx)) return;
		// The folder by its real path, as the command names it (a link to it is the same folder).
		const folder = scheduleFolder(ctx.cwd);
		const mark = scheduledMark(this.marksDir(), folder);
		this.ctx ??= ctx;
		this.parentId ||= this.parent(ctx);
		const me = this.parentId;
		const here = hostname();
		const self = thisProcess();
		let schedules = 0;
		const claim = async (replace: string[]) => {
			// Passive whatever the caller: a folder's schedules never start
			// the service (a service stopped stays stopped, its schedules
			// with it); their results wait in Temporal until a delegation or
			// an explicit command starts it, and the look runs again then.
			const env = await this.cli(true).call("schedule", [], [], {
				action: "claim",
				cwd: folder,
				by: me,
				holder: { pid: self.pid, ...(self.start && { start: self.start }), host: here },
				...(replace.length && { replace }),
			});
			schedules = schedulesOf(env).length;
			return schedulesOf(env).flatMap((s) => (s.runs ?? []).map((r) => ({ schedule: s.id, run: r })));
		};
		let runs: Array<{ schedule: string; run: ScheduleRunView }>;
		try {
			runs = await claim([]);
		} catch (e) {
			// No service runs: nothing fired meanwhile; this runs again when it starts.
			if (e instanceof SubagentsError && e.notRunning) return;
			throw e;
		}
		const gone = [
			...new Set(
				runs
					.filter(({ run }) => !run.result && run.claimed_by && run.claimed_by !== me && run.holder && (run.holder.host ?? here) === here && !alive(run.holder))
					.map(({ run }) => run.claimed_by as string),
			),
		];
		// The second claim answers for every result again (those won by
		// the first are this session's still).
		if (gone.length) runs = await claim(gone);
		if (this.closed) return;
		if (schedules === 0) {
			// No schedule left here, no run of one whose result is still to
			// come (the answer lists a deleted schedule while a run of it
			// runs), nothing waiting: later starts ask nothing.
			try {
				if (statSync(mark).mtimeMs < Date.now() - SCHEDULE_MARK_GRACE_MS) unlinkSync(mark);
			} catch {
				/* gone already */
			}
		}
		const inSession = deliveredIds(ctx.sessionManager.getBranch() as Entry[]);
		const toAck: string[] = [];
		const records = openRecords(this.marksDir());
		for (const { schedule, run } of runs) {
			const env = run.result;
			const id = env?.delegation_id;
			if (!env || !id || !run.result_id) continue;
			// A claim of an older service has no end: its fired was the end.
			const ended = run.ended ?? run.fired;
			const t = Date.parse(ended);
			const open = Number.isNaN(t) ? undefined : openAt(records, folder, me, t);
			this.scheduledFrom.set(id, { schedule, run: run.id, fired: run.ended ? run.fired : undefined, ended, ...(open && { open }), resultId: run.result_id });
			if (inSession.has(id)) toAck.push(id);
			else this.arrive(env, "scheduled");
		}
		if (toAck.length) await this.ack(toAck);
		if (!this.closed) this.flushIdle(ctx);
	}

	private async resumeNow(ctx: ExtensionContext): Promise<void> {
		this.ctx = ctx;
		this.parentId = this.parent(ctx);
		const branch = ctx.sessionManager.getBranch() as Entry[];
		const delivered = deliveredIds(branch);
		for (const id of delivered) this.acked.add(id);
		const turns = sentTurns(branch);
		for (const key of turns.delivered) this.acked.add(key);
		const local = this.dataDir() !== undefined;
		if (local && !this.mayHavePending(ctx)) return;
		// Another live pi holds this session's results: they are its to deliver.
		const own = this.marker(this.parentId);
		if (own && !(await this.claimAfterPreviousAttempt(own, ctx))) return;
		let open: Envelope;
		try {
			open = await this.openDelegations();
		} catch (e) {
			// No service runs: nothing can have finished; this runs again
			// when the service starts.
			if (e instanceof SubagentsError && e.notRunning) return;
			throw e;
		}
		// A start of this process under way may be one of the open
		// delegations: know it as ours before deciding.
		await Promise.allSettled([...this.starting]);
		if (this.closed) return;
		// Answers of messages sent to running tasks that had not come when
		// the session's last pi stopped.
		for (const t of turns.pending) this.watchTurn(t.session, t.turn, ctx, false);
		const marker = this.marker(this.parentId);
		if (marker && (open.runs ?? []).length === 0 && turns.pending.length === 0 && !this.delegatedHere.has(this.parentId)) {
			// Nothing waits for this session any more. A mark this process
			// wrote stays: its delegation may not have started yet.
			try {
				unlinkSync(marker);
			} catch {
				/* gone already */
			}
		}
		const toAck: string[] = [];
		for (const run of open.runs ?? []) {
			if (delivered.has(run.id)) {
				toAck.push(run.id);
				continue;
			}
			// Ours comes back through the call that started it.
			if (this.mine.has(run.id)) continue;
			let env: Envelope | undefined;
			try {
				env = await this.cli(true).call("status", [], [run.id]);
			} catch {
				// The wait below asks again, and rides out a worker that has
				// not polled yet.
			}
			if (this.closed) return;
			if (env?.done) this.arrive(env, "earlier");
			else this.watch(run.id, "earlier");
		}
		if (toAck.length) await this.ack(toAck);
		if (!this.closed) this.flushIdle(ctx);
	}

	/**
	 * Takes the results of another session of this folder that no pi
	 * waits for (liveness.ts: strays) into this one: its mark is held by
	 * this process from now on (another pi, or that session resumed, leaves
	 * them), finished results are delivered at once, running ones when they
	 * end. Each is acknowledged once it is written here, which closes it
	 * for its own session too. Returns how many were taken and how many of
	 * them still run; undefined when another live pi holds the session now.
	 */
	async adopt(ctx: ExtensionContext, from: { id: string; path: string }): Promise<{ taken: number; running: number } | undefined> {
		// The session's own context (start-up's) stays the one results go to.
		this.ctx ??= ctx;
		this.parentId ||= this.parent(ctx);
		const took = withMarkLock(from.path, () => {
			if (!existsSync(from.path)) return false;
			const m = readMark(from.path);
			if (alive(m.holder) && !isThisProcess(m.holder)) return false;
			writeMark(from.path, { ...m, holder: thisProcess() });
			return true;
		});
		if (took !== true) return undefined;
		this.held.add(from.id);
		const open = await this.cli().call("list", ["--kind", "delegation", "--open", "--parent-session", from.id]);
		let taken = 0;
		let running = 0;
		for (const run of open.runs ?? []) {
			if (this.acked.has(run.id) || this.adoptedFrom.has(run.id)) continue;
			this.adoptedFrom.set(run.id, from.id);
			taken++;
			let env: Envelope | undefined;
			try {
				env = await this.cli().call("status", [], [run.id]);
			} catch {
				/* the wait below asks again */
			}
			if (this.closed) break;
			if (env?.done) this.arrive(env, "adopted");
			else {
				running++;
				this.watch(run.id, "adopted");
			}
		}
		if (taken === 0) this.dropMark(from.id, from.path);
		this.flushIdle(ctx);
		return { taken, running };
	}

	/**
	 * Counts what the sessions of strays still hold open: what waits for
	 * nobody. A stray whose delegations are all closed has its mark
	 * removed (nothing of it is left to find). Passive: another session's
	 * leftovers never start the service (a SubagentsError with notRunning
	 * when none runs).
	 */
	async strayReport(strays: Array<{ id: string; path: string; mark: Mark }>): Promise<StrayReport> {
		const report: StrayReport = { sessions: [], open: 0, running: 0 };
		for (const s of strays) {
			const open = await this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", s.id]);
			const runs = open.runs ?? [];
			if (runs.length === 0) {
				this.dropMark(s.id, s.path);
				continue;
			}
			const running = runs.filter((r) => r.status === "running" || r.status === "queued").length;
			report.sessions.push({ id: s.id, session: s.mark.session, open: runs.length, running });
			report.open += runs.length;
			report.running += running;
			for (const r of runs) if (!report.latest || r.started > report.latest) report.latest = r.started;
		}
		return report;
	}

	/** Removes a session's mark unless a live pi (other than this one) holds it. */
	private dropMark(id: string, path: string): void {
		withMarkLock(path, () => {
			const m = readMark(path);
			if (alive(m.holder) && !isThisProcess(m.holder)) return;
			try {
				unlinkSync(path);
			} catch {
				/* gone already */
			}
		});
		this.held.delete(id);
	}

	/** Waits in the background for a delegation this parent started (own) or that waits for it. */
	watch(id: string, origin: Origin = "own"): void {
		if (!this.watchable(id)) return;
		this.follow(id, id, origin);
	}

	/**
	 * Waits in the background for the answer of a message this session sent
	 * to a running task: its turn `turn`, queued behind the turn under way,
	 * which no delegation carries (a send to a task between turns starts one,
	 * watched as any). The answer is delivered as a background result of
	 * this session's is, once: keyed by the session and turn (turnKey).
	 * record notes the wait in the session (an entry the model never reads),
	 * so that a pi stopped before the answer came waits for it again at the
	 * session's next start.
	 */
	watchTurn(session: string, turn: number, ctx?: ExtensionContext, record = true): void {
		const key = turnKey(session, turn);
		if (!this.watchable(key)) return;
		if (ctx) {
			this.ctx ??= ctx;
			this.parentId ||= this.parent(ctx);
		}
		this.turns.set(key, { session, turn });
		if (record) this.pi.appendEntry(TURN_SENT_TYPE, { session, turn });
		this.follow(key, session, "own", (e) => {
			// Its session is gone, and the answer with it: no later start waits for it.
			if (e instanceof SubagentsError && e.code === "SESSION_NOT_FOUND" && !this.closed) this.pi.appendEntry(TURN_SENT_TYPE, { session, turn, gone: true });
		});
	}

	private watchable(key: string): boolean {
		return !(this.closed || this.watchers.has(key) || this.ready.has(key) || this.handed.has(key) || this.acked.has(key));
	}

	/** Follows target (a delegation, or the session of a turn) until it ends, and hands its result over as key. */
	private follow(key: string, target: string, origin: Origin, failed?: (e: unknown) => void): void {
		this.origins.set(key, origin);
		const abort = new AbortController();
		const done = this.cli()
			.follow(target, (env) => this.noticeQuestions(env), abort.signal)
			// A delegation's result is known by its envelope's ID, a turn's by its key.
			.then((env) => this.arrive(env, origin, this.turns.has(key) ? key : env.delegation_id))
			.catch((e) => {
				/* stopped or unreachable: the next start of the parent finds it again */
				failed?.(e);
			})
			.finally(() => {
				this.watchers.delete(key);
				this.wake();
			});
		this.watchers.set(key, { abort, done });
	}

	/** A result is ready to hand over, as id: a delegation's ID (the envelope's), or a turn's key. */
	private arrive(env: Envelope, origin: Origin, id = env.delegation_id): void {
		if (!id || this.acked.has(id) || this.handed.has(id)) return;
		this.ready.set(id, { env, origin });
		this.wake();
		if (this.ctx) this.flushIdle(this.ctx);
	}

	/**
	 * A background task's child asked (docs/questions.md): the session is
	 * told at once, as a result would be, since the child waits for it.
	 */
	private noticeQuestions(env: Envelope): void {
		const asked = asking(env);
		if (asked.length && this.ctx) this.toldOf(toldInBranch(this.ctx));
		let fresh = false;
		for (const it of asked) {
			const key = questionKey(it);
			if (this.told.has(key) || this.questions.has(key)) continue;
			this.questions.set(key, it);
			fresh = true;
		}
		if (!fresh) return;
		this.wake();
		if (this.ctx) this.flushIdle(this.ctx);
	}

	/** Marks questions told: by the first prompt's look, or read back from the session's branch. */
	toldOf(keys: Iterable<string>): void {
		for (const k of keys) {
			this.told.add(k);
			this.questions.delete(k);
		}
	}

	private takeQuestions() {
		const drafts = [...this.questions.values()].map((it) => questionDraft(it, "A subagent task started in the background waits for your answer (task op \"reply\" with its id and your answer in message)."));
		this.toldOf([...this.questions.keys()]);
		return drafts;
	}

	private wake(): void {
		for (const w of this.waiters.splice(0)) w();
	}

	/**
	 * Hands finished results to pi as custom messages when it is idle: they
	 * are written at once, and in interactive modes start a turn.
	 */
	flushIdle(ctx: ExtensionContext): void {
		if (!ctx.isIdle() || this.ready.size + this.questions.size === 0) return;
		const interactive = ctx.mode === "tui" || ctx.mode === "rpc";
		for (const d of this.takeQuestions()) {
			sendDraft(this.pi, d, { triggerTurn: interactive });
		}
		for (const [id, { env, origin }] of this.ready) {
			this.ready.delete(id);
			this.handed.add(id);
			sendDraft(this.pi, this.draft(id, env), { triggerTurn: startsTurn(origin, interactive) });
		}
		void this.ackPersisted(ctx);
	}

	/** The message that delivers the result ready as id: a delegation's, or the answer of a turn (turnDraft). */
	private draft(id: string, env: Envelope) {
		const sent = this.turns.get(id);
		return sent ? turnDraft(env, sent) : deliveryDraft(env, this.adoptedFrom.get(id), this.scheduledFrom.get(id));
	}

	/**
	 * Finished results as boundary drafts (turn_end, agent_before_settle),
	 * and whether one of them starts a turn (startsTurn): the others ride
	 * with the next model call if there is one, and are in the session
	 * either way.
	 */
	takeDrafts(interactive: boolean, only?: Origin) {
		const entries: Array<ReturnType<typeof deliveryDraft> | ReturnType<typeof turnDraft> | ReturnType<typeof questionDraft>> = [];
		let turn = false;
		if (!only || only === "own") {
			// A question starts a turn in every mode: the child waits for
			// the answer the model gives.
			const asked = this.takeQuestions();
			entries.push(...asked);
			turn ||= asked.length > 0;
		}
		for (const [id, { env, origin }] of this.ready) {
			if (only && origin !== only) continue;
			entries.push(this.draft(id, env));
			turn ||= startsTurn(origin, interactive);
			this.ready.delete(id);
			this.handed.add(id);
		}
		return { entries, turn };
	}

	/**
	 * Waits until a result of origin is ready or none of origin is waited
	 * for any more (a print or JSON run, which pi ends when its agent
	 * settles, waits so for the background work its model started).
	 */
	async nextResult(signal?: AbortSignal, origin: Origin = "own"): Promise<void> {
		const ready = () => [...this.ready.values()].some((r) => r.origin === origin) || (origin === "own" && this.questions.size > 0);
		while (!ready() && this.waitingFor(origin) && !signal?.aborted) {
			await new Promise<void>((resolve) => {
				this.waiters.push(resolve);
				signal?.addEventListener("abort", () => resolve(), { once: true });
			});
		}
	}

	/** Acknowledges every delivered result that is written in the session file. */
	ackPersisted(ctx: ExtensionContext): Promise<void> {
		// One at a time: each looks at what the one before it acknowledged,
		// so no ID is sent twice, and a caller that does not wait (turn_end:
		// the result is already on disk, the next model call need not wait for
		// a process) is still ordered before one that does (agent_settled).
		this.acking = this.acking.then(() => this.ackPersistedNow(ctx)).catch(() => {
			/* not acknowledged: the next turn or start tries again */
		});
		return this.acking;
	}

	private acking: Promise<void> = Promise.resolve();

	private async ackPersistedNow(ctx: ExtensionContext): Promise<void> {
		const branch = ctx.sessionManager.getBranch() as Entry[];
		const file = ctx.sessionManager.getSessionFile();
		let onDisk = "";
		try {
			onDisk = file ? readFileSync(file, "utf8") : "";
		} catch {
			return;
		}
		const ids = [...deliveredIds(branch)].filter((id) => !this.acked.has(id) && onDisk.includes(id));
		if (ids.length) await this.ack(ids);
	}

	/**
	 * Acknowledges delivered results. Passive: they were delivered while
	 * the service ran; one stopped since stays stopped, and the session's
	 * next look (which acknowledges what its branch holds) settles them.
	 */
	private async ack(all: string[]): Promise<void> {
		// A scheduled run's result is acknowledged to the workflow that
		// holds it for the folder, the rest to their delegations.
		const scheduled = all.filter((id) => this.scheduledFrom.has(id));
		const ids = all.filter((id) => !this.scheduledFrom.has(id));
		if (scheduled.length) {
			try {
				const results = scheduled.map((id) => this.scheduledFrom.get(id)?.resultId as string);
				await this.cli(true).call("schedule", [], [], { action: "ack", by: this.parentId, ids: results });
				for (const id of scheduled) {
					this.acked.add(id);
					this.handed.delete(id);
				}
			} catch {
				/* not acknowledged: the next turn or start tries again */
			}
		}
		if (ids.length === 0) return;
		try {
			await this.cli(true).call("ack", ["--by", this.parentId], ids);
			for (const id of ids) {
				this.acked.add(id);
				this.handed.delete(id);
			}
		} catch {
			/* not acknowledged: the next turn or start tries again */
			return;
		}
		await this.clearMarkIfDone();
		// An adopted session whose last open delegation this acknowledged has nothing left to find.
		for (const from of new Set(ids.map((id) => this.adoptedFrom.get(id)).filter((f) => f !== undefined))) {
			await this.clearAdoptedIfDone(from);
		}
	}

	private async clearAdoptedIfDone(from: string): Promise<void> {
		const marker = this.marker(from);
		if (!marker || !this.held.has(from)) return;
		if ([...this.watchers.keys()].some((id) => this.adoptedFrom.get(id) === from)) return;
		try {
			const open = await this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", from]);
			if ((open.runs ?? []).every((r) => this.acked.has(r.id))) this.dropMark(from, marker);
		} catch {
			/* kept: a later look finds what is left */
		}
	}

	/** This session's delegations that are still open (not acknowledged); asks only a service that runs. */
	private openDelegations(): Promise<Envelope> {
		return this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", this.parentId]);
	}

	/** Removes the session's waiting mark once none of its delegations is open. */
	private async clearMarkIfDone(): Promise<void> {
		const marker = this.marker(this.parentId);
		if (!marker || !existsSync(marker) || [...this.watchers.keys()].some((id) => !this.adoptedFrom.has(id))) return;
		try {
			const open = await this.openDelegations();
			// One this process acknowledged closes a moment later (the ack
			// is a signal): it waits for nothing more.
			if ((open.runs ?? []).every((r) => this.acked.has(r.id))) {
				unlinkSync(marker);
				this.delegatedHere.delete(this.parentId);
			}
		} catch {
			/* kept: the next start looks once more */
		}
	}

	/**
	 * Stops waiting (the work goes on, and is found again on the next
	 * start), and lets go of the marks this process holds: what is still
	 * open waits for nobody now, and a pi started later in the folder
	 * offers it (a process killed lets go the same way: it is no longer
	 * alive).
	 */
	shutdown(): void {
		this.closed = true;
		if (this.openNoted) noteOpen(this.marksDir(), thisProcess(), Date.now());
		this.openNoted = false;
		for (const w of this.watchers.values()) w.abort.abort();
		this.watchers.clear();
		this.wake();
		for (const id of this.held) {
			const marker = this.marker(id);
			if (!marker) continue;
			try {
				withMarkLock(marker, () => {
					if (!existsSync(marker)) return;
					const m = readMark(marker);
					if (!isThisProcess(m.holder)) return;
					const { holder: _released, ...rest } = m;
					writeMark(marker, rest);
				});
			} catch {
				/* the mark stays held by a process that is gone: the same to a later pi */
			}
		}
	}
}
