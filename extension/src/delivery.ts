// Delivery of delegation results into the parent session, exactly once.
//
// Every delegation the parent starts is a Temporal workflow that stays open
// until the parent acknowledges its results (`subagents ack`). A result
// counts as delivered once it is written in the parent's session file: as
// the tool result of the call that waited for it, or as a custom message
// when it arrived in the background or after a restart. Only then is it
// acknowledged, so a parent killed at any point gets each result on its
// next start, and never twice.

import { existsSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { SubagentsError, type SubagentsCli } from "./cli.ts";
import { deliveryText, type Envelope } from "./format.ts";

/** When this pi started: marks it wrote are newer. */
const STARTED_AT = Date.now() - process.uptime() * 1000;

function markedBefore(path: string, t: number): boolean {
	try {
		return statSync(path).mtimeMs < t;
	} catch {
		return false;
	}
}

/** customType of the delivery messages in the parent session. */
export const RESULT_MESSAGE_TYPE = "subagents-result";

interface Entry {
	type: string;
	customType?: string;
	details?: { delegationId?: string };
	message?: { role?: string; details?: { delegationIds?: string[] } };
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

/** The draft of a delivery message, for turn boundaries. */
export function deliveryDraft(env: Envelope) {
	return {
		type: "custom_message" as const,
		customType: RESULT_MESSAGE_TYPE,
		content: deliveryText(env),
		display: true,
		details: { delegationId: env.delegation_id, envelope: env },
	};
}

export class Delivery {
	private readonly pi: ExtensionAPI;
	private readonly cli: (passive?: boolean) => SubagentsCli;
	/** Delegations acknowledged by this process. */
	private readonly acked = new Set<string>();
	/** Background delegations this process waits for, by ID. */
	private readonly watchers = new Map<string, { abort: AbortController; done: Promise<void> }>();
	/** Finished results not yet in the session. */
	private readonly ready = new Map<string, Envelope>();
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

	/** The local service's data dir, where this parent marks that it waits for results; undefined for a remote Temporal. */
	private readonly dataDir: () => string | undefined;

	constructor(pi: ExtensionAPI, cli: (passive?: boolean) => SubagentsCli, dataDir: () => string | undefined = () => undefined) {
		this.pi = pi;
		this.cli = cli;
		this.dataDir = dataDir;
	}

	/** The parent session ID every delegation records. */
	parent(ctx: ExtensionContext): string {
		return ctx.sessionManager.getSessionId();
	}

	/**
	 * The parent session ID for a delegation whose results come back here:
	 * it also marks, in the data dir, that this session waits for results,
	 * so that its next start looks for them even when no service runs
	 * (and starts it), and otherwise asks nothing.
	 */
	delivering(ctx: ExtensionContext): string {
		const id = this.parent(ctx);
		const marker = this.marker(id);
		if (marker) {
			try {
				mkdirSync(dirname(marker), { recursive: true, mode: 0o700 });
				writeFileSync(marker, "");
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

	private marker(parentId: string): string | undefined {
		const dir = this.dataDir();
		return dir && /^[A-Za-z0-9_-]+$/.test(parentId) ? join(dir, "pending", parentId) : undefined;
	}

	running(): string[] {
		return [...this.watchers.keys()];
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
	 * session that marked itself waiting asks anything (starting the
	 * service if it must): any other has nothing to get, and its start
	 * makes no call. A remote Temporal keeps no marks and is asked each
	 * time; passive: only a service that runs already.
	 */
	resume(ctx: ExtensionContext, passive = false): Promise<void> {
		// One look at a time: pi's start and the start of the service (which
		// runs the look again, now that there is something to ask) may both
		// ask, and two looks at once would both find the same delegation.
		const next = this.resuming.then(() => this.resumeNow(ctx, passive));
		this.resuming = next.catch(() => {});
		return next;
	}

	private async resumeNow(ctx: ExtensionContext, passive: boolean): Promise<void> {
		this.ctx = ctx;
		this.parentId = this.parent(ctx);
		const branch = ctx.sessionManager.getBranch() as Entry[];
		const delivered = deliveredIds(branch);
		for (const id of delivered) this.acked.add(id);
		const local = this.dataDir() !== undefined;
		if (local && !this.mayHavePending(ctx)) return;
		let open: Envelope;
		try {
			open = await this.openDelegations(passive && !local);
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
		const marker = this.marker(this.parentId);
		if (marker && (open.runs ?? []).length === 0 && markedBefore(marker, STARTED_AT)) {
			// Nothing waits for this session any more. A mark this process
			// wrote stays: its delegation may not have started yet.
			unlinkSync(marker);
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
				env = await this.cli().call("status", [], [run.id]);
			} catch {
				// The wait below asks again, and rides out a worker that has
				// not polled yet.
			}
			if (this.closed) return;
			if (env?.done) this.arrive(env);
			else this.watch(run.id);
		}
		if (toAck.length) await this.ack(toAck);
		if (!this.closed) this.flushIdle(ctx);
	}

	/** Waits in the background for a delegation this parent started. */
	watch(id: string): void {
		if (this.closed || this.watchers.has(id) || this.ready.has(id) || this.handed.has(id) || this.acked.has(id)) return;
		const abort = new AbortController();
		const done = this.cli()
			.follow(id, () => {}, abort.signal)
			.then((env) => this.arrive(env))
			.catch(() => {
				/* stopped or unreachable: the next start of the parent finds it again */
			})
			.finally(() => {
				this.watchers.delete(id);
				this.wake();
			});
		this.watchers.set(id, { abort, done });
	}

	private arrive(env: Envelope): void {
		const id = env.delegation_id;
		if (!id || this.acked.has(id) || this.handed.has(id)) return;
		this.ready.set(id, env);
		this.wake();
		if (this.ctx) this.flushIdle(this.ctx);
	}

	private wake(): void {
		for (const w of this.waiters.splice(0)) w();
	}

	/**
	 * Hands finished results to pi as custom messages when it is idle: they
	 * are written at once, and in interactive modes start a turn.
	 */
	flushIdle(ctx: ExtensionContext): void {
		if (!ctx.isIdle() || this.ready.size === 0) return;
		const interactive = ctx.mode === "tui" || ctx.mode === "rpc";
		for (const [id, env] of this.ready) {
			this.ready.delete(id);
			this.handed.add(id);
			const d = deliveryDraft(env);
			this.pi.sendMessage({ customType: d.customType, content: d.content, display: d.display, details: d.details }, { triggerTurn: interactive });
		}
		void this.ackPersisted(ctx);
	}

	/** Finished results as boundary drafts (turn_end, agent_before_settle). */
	takeDrafts() {
		const drafts = [...this.ready.values()].map(deliveryDraft);
		for (const id of this.ready.keys()) this.handed.add(id);
		this.ready.clear();
		return drafts;
	}

	/**
	 * In print and JSON modes pi exits when the agent settles: wait for the
	 * next background result so it reaches the parent in a later turn.
	 */
	async nextResult(signal?: AbortSignal): Promise<void> {
		if (this.ready.size > 0 || this.watchers.size === 0) return;
		await new Promise<void>((resolve) => {
			this.waiters.push(resolve);
			signal?.addEventListener("abort", () => resolve(), { once: true });
		});
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

	private async ack(ids: string[]): Promise<void> {
		try {
			await this.cli().call("ack", ["--by", this.parentId], ids);
			for (const id of ids) {
				this.acked.add(id);
				this.handed.delete(id);
			}
		} catch {
			/* not acknowledged: the next turn or start tries again */
			return;
		}
		await this.clearMarkIfDone();
	}

	/** This session's delegations that are still open (not acknowledged). */
	private openDelegations(passive = false): Promise<Envelope> {
		return this.cli(passive).call("list", ["--kind", "delegation", "--open", "--parent-session", this.parentId]);
	}

	/** Removes the session's waiting mark once none of its delegations is open. */
	private async clearMarkIfDone(): Promise<void> {
		const marker = this.marker(this.parentId);
		if (!marker || !existsSync(marker) || this.watchers.size > 0) return;
		try {
			const open = await this.openDelegations();
			// One this process acknowledged closes a moment later (the ack
			// is a signal): it waits for nothing more.
			if ((open.runs ?? []).every((r) => this.acked.has(r.id))) unlinkSync(marker);
		} catch {
			/* kept: the next start looks once more */
		}
	}

	/** Stops waiting (the work goes on, and is found again on the next start). */
	shutdown(): void {
		this.closed = true;
		for (const w of this.watchers.values()) w.abort.abort();
		this.watchers.clear();
		this.wake();
	}
}
