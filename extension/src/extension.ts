// Durable subagents for pi: the parent-side extension.
//
// Every tool starts a delegation through the `subagents` command, which
// runs it as a Temporal workflow: the children keep running when this pi
// stops, and their results reach this session exactly once (delivery.ts).
//
// pi loads it compiled (dist/extension.js, built by `make build`) through
// ../index.ts, which hands it pi's own TypeBox and TUI modules: it imports
// no package at run time, only node's.

import { setFlagsFromString } from "node:v8";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { Type as TypeBuilder } from "typebox";
import { onServiceStarted, SubagentsCli, SubagentsError, stopServers } from "./cli.ts";
import { Delivery, nestedParent, questionDraft, questionKey, sendDraft, toldInBranch } from "./delivery.ts";
import {
	delegateResult,
	type Envelope,
	failedResult,
	items,
	modelLabel,
	NO_PROFILES_TEXT,
	primaryPrompt,
	primaryToolName,
	type ProfileSummary,
	progressText,
	renderDelegation,
	renderTruncated,
	resultText,
	sessionNotFound,
	type Style,
	strayHint,
	adoptedLine,
	subagentError,
	subagentResult,
	succeeded,
	taskDetails,
	taskErrorCode,
	taskTree,
	planHeader,
	asking,
} from "./format.ts";
import { registerDoctor } from "./doctor.ts";
import { registerFleet } from "./fleet.ts";
import { strays } from "./liveness.ts";
import { SCHEDULE_HELP, scheduleOp } from "./schedule.ts";
import { rememberedProfiles, rememberProfiles, unchanged, type Watch } from "./profile-cache.ts";
import { connectionFlags, idleTtlSeconds, loadSettings, localService, type Settings } from "./settings.ts";

type TypeBuilder = typeof TypeBuilder;

/**
 * Lets a print or JSON run end as soon as its work is done. A pi that made a
 * second model call (as a parent does when a tool result comes back) waits at
 * exit for V8 to finish compiling the HTTP parser's WebAssembly (undici's
 * llhttp) to its optimizing tier, in the background: 70-100 ms here on every
 * delegating run (README "Warm children" has the figures). Baseline-compiled
 * (Liftoff) WebAssembly parses a model's answers just as well for a run that
 * then exits, so such a run skips the optimizing tier for what V8 compiles
 * from here on (this runs before the session's first model call); an
 * interactive pi keeps V8's defaults.
 */
function quickExit() {
	try {
		setFlagsFromString("--liftoff-only");
	} catch {
		/* a Node without the flag keeps its defaults */
	}
}

/**
 * How long the questions look asked as the extension loads stands for the
 * first prompt's: longer than a print or JSON run takes from loading its
 * extensions to its prompt (about 0.1 s here, a second on a loaded
 * machine); an interactive session's first prompt, typed later, asks
 * afresh, so that a question that began to wait meanwhile is told.
 */
const questionsAheadMs = 5_000;

/**
 * Set when this process ends on a signal (the worker stopping a child, a
 * service manager, kill): pi aborts its running tool calls as it disposes
 * of the session, which is nobody's cancel. The work is durable, goes on,
 * and its result comes back at the next start.
 */
let signalled = false;
let listening = false;

/**
 * Listens, once per process, for the signals that end it: prepended, so
 * that signalled is set before pi's own handler aborts anything; alone (pi
 * has not put its own yet), it ends the process as the signal's default
 * would.
 */
function listenForSignals(): void {
	if (listening) return;
	listening = true;
	for (const sig of ["SIGTERM", "SIGHUP"] as const) {
		process.prependListener(sig, () => {
			signalled = true;
			if (process.listenerCount(sig) === 1) process.exit(sig === "SIGTERM" ? 143 : 129);
		});
	}
}

/** Whether ctx's session shows results as they come (terminal, RPC): print and JSON runs end with their answer. */
function interactive(ctx: ExtensionContext): boolean {
	return ctx.mode === "tui" || ctx.mode === "rpc";
}

/** What the entry hands over from pi's own modules (see ../index.ts). */
export interface Host {
	Type: TypeBuilder;
	/** pi's TUI module, imported where something is drawn. */
	loadTui: () => Promise<typeof import("@earendil-works/pi-tui")>;
}

/**
 * A string enum as pi-ai's StringEnum writes it ({type: "string", enum}),
 * which every provider's schema dialect accepts. Written here so that loading
 * the extension does not load pi-ai's module graph: pi's start pays for what
 * an extension imports, and a session that never delegates should pay nothing.
 */
function StringEnum<T extends readonly string[]>(Type: TypeBuilder, values: T, options?: { description?: string }) {
	return Type.Unsafe<T[number]>({ type: "string", enum: [...values], ...(options?.description && { description: options.description }) });
}

/** The tools' parameter schemas, built with pi's TypeBox. */
function schemas(Type: TypeBuilder) {
	const FileSpec = Type.Union([
		Type.String(),
		Type.Object({
			path: Type.String(),
			start: Type.Optional(Type.Integer({ minimum: 1 })),
			end: Type.Optional(Type.Integer({ minimum: 1 })),
			head: Type.Optional(Type.Integer({ minimum: 1 })),
			tail: Type.Optional(Type.Integer({ minimum: 1 })),
		}),
	]);

	const SubagentParams = Type.Object(
		{
			agent: Type.String({ minLength: 1, description: "Name of the agent profile to delegate to" }),
			task: Type.String({ minLength: 1, description: "The focused task for the subagent" }),
			sessionId: Type.Optional(Type.String({ description: "Continue this earlier session (its context is kept)" })),
		},
		{ additionalProperties: false },
	);

	const TaskItem = Type.Object({
		subagent_type: Type.String({ description: "Profile to run the task with" }),
		description: Type.Optional(Type.String({ description: "Short label of the task" })),
		prompt: Type.String({ description: "What the subagent should do" }),
		cwd: Type.Optional(Type.String({ description: "Absolute folder to run in (default: this session's)" })),
	});

	const TaskParams = Type.Object({
		op: Type.Optional(StringEnum(Type, ["start", "status", "wait", "send", "cancel", "result", "resume", "apply", "reply", "schedule"] as const, { description: "Operation (default start)" })),
		subagent_type: Type.Optional(Type.String({ description: "start: profile to run the task with" })),
		description: Type.Optional(Type.String({ description: "start: short label of the task" })),
		prompt: Type.Optional(Type.String({ description: "start: the task; send: the follow-up message" })),
		cwd: Type.Optional(Type.String({ description: "start: absolute folder to run in" })),
		tasks: Type.Optional(Type.Array(TaskItem, { minItems: 1, maxItems: 16, description: "start: several tasks at once" })),
		parallel: Type.Optional(Type.Boolean({ description: "start with tasks[]: run them at the same time (up to 4)" })),
		async: Type.Optional(Type.Boolean({ description: "start/send: return at once; the result is delivered into this session when it is done" })),
		id: Type.Optional(Type.String({ description: "status/wait/send/cancel: a task_id" })),
		ids: Type.Optional(Type.Array(Type.String(), { description: "status/wait/cancel: several task_ids" })),
		timeout_ms: Type.Optional(Type.Integer({ minimum: 1, description: "wait: give up waiting after this long (the task goes on)" })),
		context: Type.Optional(StringEnum(Type, ["fresh", "fork"] as const, { description: "start: fork starts the child from a copy of this conversation" })),
		worktree: Type.Optional(Type.Boolean({ description: "start: run in a git worktree; op apply (id, discard?) applies its change" })),
		discard: Type.Optional(Type.Boolean({ description: "apply: drop the change instead" })),
		message: Type.Optional(Type.String({ description: "reply: the answer to the question a task's child asked (id: its task_id)" })),
		plan: Type.Optional(Type.Unknown({ description: PLAN_HELP })),
		args: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "start: the saved plan's arguments" })),
		schedule: Type.Optional(Type.Unknown({ description: SCHEDULE_HELP })),
	});

	const DelegateParams = Type.Object({
		tasks: Type.Array(
			Type.Object({
				name: Type.String({ description: "Display name of this sub-agent" }),
				prompt: Type.String({ description: "The task sent to the sub-agent" }),
				cwd: Type.Optional(Type.String({ description: "Absolute working directory (default: this session's)" })),
				profile: Type.Optional(Type.String({ description: "Profile for this task (overrides the top-level profile)" })),
				timeout: Type.Optional(Type.Number({ minimum: 1, description: "Timeout in seconds (default 600)" })),
				questionTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
				resume: Type.Optional(Type.String({ description: "A previous session ID to continue" })),
				files: Type.Optional(Type.Array(FileSpec, { description: "Files to put before the prompt" })),
			}),
			{ minItems: 1, maxItems: 16 },
		),
		profile: Type.Optional(Type.String({ description: "Default profile for tasks that name none" })),
	});

	const SessionParams = Type.Object({ sessionId: Type.String({ description: "The session ID returned by delegate_to_subagents" }) });
	return { SubagentParams, TaskParams, DelegateParams, SessionParams };
}


// The plan surface's whole help: every request of the parent carries it,
// so it says the form in the fewest words a model needs to write one
// (docs/plans.md has the rest).
const PLAN_HELP =
	"start: run a plan instead of one task: a saved plan's name, or {steps:[...]} whose steps are durable subagents. " +
	"A step is a task {key, agent, task, cwd?, continue?: KEY (next turn of that step's session), context?: \"fork\", verdicts?: [words], " +
	"gate?: {command}, budget?: {toolCalls?, tokens?, cost?}} or a group: {steps:[...]} in sequence, {parallel:[...]} at once " +
	"(a failure skips the rest of its group only), {loop: {max, until: {step, verdict}}, steps:[...]}. " +
	"In a task, {steps.KEY.output} (or .verdict) is an earlier step's result, {args.NAME} an argument, {round} the loop's round. " +
	"resume: id of a failed plan, plan to change steps.";

// How long an aborted call waits for its cancel to land: a child gets
// SIGTERM and its workflow records the cancel within a second or two here;
// ten seconds covers a loaded machine while Escape still answers soon.
const CANCEL_WAIT_MS = 10_000;

// Tools every pi has; a primary profile's tool must not shadow one.
const BUILTIN_TOOLS = ["read", "bash", "edit", "write", "grep", "find", "ls"];

type Update = ((r: { content: Array<{ type: "text"; text: string }>; details: unknown }) => void) | undefined;

function text(s: string, details: unknown) {
	return { content: [{ type: "text" as const, text: s }], details };
}

function codeOf(e: unknown): { code: string; message: string; category: string } {
	if (e instanceof SubagentsError) return { code: e.code, message: e.message, category: e.category };
	return { code: "SUBAGENT_FAILED", message: e instanceof Error ? e.message : String(e), category: "runtime" };
}

export function activate(pi: ExtensionAPI, host: Host): void {
	const { Type } = host;
	const { SubagentParams, TaskParams, DelegateParams, SessionParams } = schemas(Type);
	/**
	 * pi's TUI text component, loaded only where something is drawn (an
	 * interactive session), after the session has started: print and JSON
	 * modes never draw, and pi's start does not wait for it.
	 */
	let tui: Awaited<ReturnType<Host["loadTui"]>> | undefined;
	const loadTui = () => {
		if (!tui)
			host
				.loadTui()
				.then((m) => (tui = m))
				.catch(() => {});
	};

	listenForSignals();
	/**
	 * Set when this session shuts down (pi's exit, a session replaced):
	 * see signalled.
	 */
	let shutDown = false;
	const terminating = () => signalled || shutDown;

	let settings: Settings = loadSettings(process.cwd());
	/** The session's context, for the status line while the service starts. */
	let current: ExtensionContext | undefined;
	const status = (line: string) => {
		if (current?.hasUI) current.ui.setStatus("subagents", line);
		else process.stderr.write(`subagents: ${line}\n`);
	};
	const cli = (passive = false) =>
		new SubagentsCli({ bin: settings.bin, connection: connectionFlags(settings), local: localService(settings), passive, onStatus: status });
	const delivery = new Delivery(pi, cli, () => localService(settings)?.dataDir);
	const registered = new Set<string>(BUILTIN_TOOLS);
	/**
	 * The tool calls whose result is a failure or refusal. A tool returns its
	 * result with details (the contracts' error fields); pi marks a result as
	 * an error only when execute throws, which drops them. The tool_result
	 * handler below sets isError for these calls instead.
	 */
	const failedCalls = new Set<string>();
	function failed<R>(toolCallId: string, result: R): R {
		failedCalls.add(toolCallId);
		return result;
	}
	pi.on("tool_result", (event) => {
		if (failedCalls.delete(event.toolCallId)) return { isError: true };
	});
	/**
	 * The session's start-up work (the primary profiles' listing, results
	 * waiting from an earlier run). pi's start does not wait for it: the
	 * socket's answers would hold the first prompt back. What reads or
	 * starts delegations waits for it, so that a delegation this session
	 * starts is never also found as an earlier one.
	 */
	let startedUp: Promise<void> = Promise.resolve();
	/** Waits for the start-up work, including any that began while it waited (the service started meanwhile). */
	async function startUpDone(): Promise<void> {
		let seen: Promise<void> | undefined;
		while (seen !== startedUp) {
			seen = startedUp;
			await seen;
		}
	}

	/**
	 * Starts (start) or continues (send) work whose result comes back to
	 * this session: marked as waited for, and known as this process's own.
	 */
	async function begin(ctx: ExtensionContext, verb: "start" | "send", request: Record<string, unknown>): Promise<Envelope> {
		await startUpDone();
		// The task contract's task retention: how long a finished session
		// stays for a send (taskRetentionMs; the service's default without).
		const ttl = verb === "start" ? idleTtlSeconds(settings) : undefined;
		return delivery.own(
			cli().call(verb, [], [], { ...request, parent_session_id: delivery.delivering(ctx), deliver: true, ...(ttl !== undefined ? { idle_ttl_seconds: ttl } : {}) }),
		);
	}

	/**
	 * The task contract's onUpdate throttle: at most one update per
	 * onUpdateThrottleMs, none that repeats the last; the answer itself is
	 * never held back (it is the tool's result, not an update).
	 */
	function throttled(onUpdate: Update | undefined): (t: string, details: unknown) => void {
		let lastAt = 0;
		let lastFrame = "";
		return (t, details) => {
			if (!onUpdate) return;
			const frame = JSON.stringify([t, details]);
			const now = Date.now();
			if (frame === lastFrame || (lastAt > 0 && now - lastAt < settings.onUpdateThrottleMs)) return;
			lastAt = now;
			lastFrame = frame;
			onUpdate(text(t, details));
		};
	}

	/**
	 * Starts a delegation for this parent and waits for it with live
	 * progress; the parent's abort cancels it. With async, returns at once
	 * and the result is delivered later.
	 */
	async function delegate(
		ctx: ExtensionContext,
		request: Record<string, unknown>,
		opts: { signal?: AbortSignal; onUpdate?: Update; async?: boolean; progress?: (env: Envelope) => { text: string; details: unknown } },
	): Promise<Envelope> {
		return follow(await begin(ctx, "start", request), opts);
	}

	async function follow(
		started: Envelope,
		opts: { signal?: AbortSignal; onUpdate?: Update; async?: boolean; progress?: (env: Envelope) => { text: string; details: unknown } },
	): Promise<Envelope> {
		const id = started.delegation_id ?? started.task_id;
		if (!id) return started;
		if (opts.async) {
			if (started.delegation_id) delivery.watch(started.delegation_id);
			return started;
		}
		// The parent's abort (Escape) cancels the work; the call then answers
		// with the work's state after the cancel (cancelled, or the answers
		// of tasks that had finished), not with a wait that stopped midway.
		let cancelling: Promise<Envelope | undefined> | undefined;
		// Decided a moment later: a process that is ending aborts first and
		// says so (terminating) within the same turn of the event loop.
		const onAbort = () => (cancelling ??= new Promise((r) => setImmediate(r)).then(() => (terminating() ? undefined : cancelAndFollow(id))));
		if (opts.signal?.aborted) onAbort();
		else opts.signal?.addEventListener("abort", onAbort, { once: true });
		const update = throttled(opts.onUpdate);
		// A child that asks its parent (docs/questions.md) waits for the
		// answer: the call ends with the question, so that this session's
		// model can answer it (task op "reply"); the work goes on, and its
		// result is delivered into this session when it ends.
		const atQuestion = new AbortController();
		let asked: Envelope | undefined;
		try {
			const env = await cli()
				.follow(
					id,
					(env) => {
						if (opts.progress) {
							const p = opts.progress(env);
							update(p.text, p.details);
						}
						if (!asked && asking(env).length > 0) {
							asked = env;
							atQuestion.abort();
						}
					},
					opts.signal ? AbortSignal.any([opts.signal, atQuestion.signal]) : atQuestion.signal,
				)
				.catch((e) => {
					if (asked && !cancelling) return asked;
					throw e;
				});
			if (asked && !cancelling) {
				// The call's result tells the model of these questions; the
				// watch tells it of later ones only.
				delivery.toldOf(asking(asked).map(questionKey));
				if (started.delegation_id) delivery.watch(started.delegation_id);
				return { ...asked, wait_status: "question" };
			}
			if (cancelling) return (await cancelling) ?? env;
			// The wait ended before the work without our asking (the service
			// went away): the result comes back into this session when it can.
			if (!env.done && started.delegation_id) delivery.watch(started.delegation_id);
			return env;
		} catch (e) {
			if (cancelling) {
				const after = await cancelling;
				if (after) return after;
			}
			// The wait broke (the service went away) while the work goes on:
			// its result comes back into this session when it can.
			if (started.delegation_id && !opts.signal?.aborted) delivery.watch(started.delegation_id);
			throw e;
		} finally {
			opts.signal?.removeEventListener("abort", onAbort);
		}
	}

	/**
	 * The parent gave up: stop the work and wait for its state after the
	 * cancel, which the call returns (and which is acknowledged once that
	 * result is in the session). A cancel that has not landed within
	 * CANCEL_WAIT_MS leaves the call with what it has; the end is then
	 * followed in the background and acknowledged as aborted.
	 */
	async function cancelAndFollow(id: string): Promise<Envelope | undefined> {
		try {
			await cli().call("cancel", [], [id]);
			const env = await cli().follow(id, () => {}, undefined, CANCEL_WAIT_MS);
			if (env.done) return env;
			void cli()
				.follow(id, () => {}, undefined, 60_000)
				.then((end) => (end.delegation_id && end.done ? cli().call("ack", ["--by", "aborted"], [end.delegation_id]) : undefined))
				.catch(() => {
					/* a restart of the parent finds it and delivers the cancelled result */
				});
			return env;
		} catch {
			/* a restart of the parent finds it and delivers the cancelled result */
			return undefined;
		}
	}

	const progressOf = (env: Envelope) => ({ text: progressText(env, 3), details: { streaming: true, envelope: env } });

	/**
	 * The whole output of env's task when the service cut the envelope's
	 * (the SingleResult contract cuts only the text): read with `output --full`
	 * from its start, as much as one read of the service holds (1 MiB).
	 * Undefined when nothing was cut, or the read failed (the cut output
	 * serves then).
	 */
	async function fullOutput(env: Envelope): Promise<string | undefined> {
		const it = items(env)[0];
		if (!it?.output_truncated || !it.done) return undefined;
		try {
			const out = await cli().call("output", ["--full", "--from", "0"], [it.task_id]);
			// A turn whose full output is gone (its artifact file) answers with the cut one.
			return out.text && out.text !== it.output ? out.text : undefined;
		} catch {
			return undefined;
		}
	}

	// --- subagent (the sessions and SingleResult contracts) ---
	if (settings.tools.subagent) {
		pi.registerTool({
			name: "subagent",
			label: "Subagent",
			description:
				"Delegate a focused task to a named agent profile, run as a durable child pi session. Returns the agent's finalized result with its session ID; pass sessionId to continue that session with its context.",
			parameters: SubagentParams,
			async execute(callId, params, signal, onUpdate, ctx) {
				try {
					// The sessions contract names a session by folder, agent and ID:
					// the same three continue it, an ID nobody used yet starts it,
					// another agent or folder is another session (client/sticky.go).
					const started = params.sessionId
						? await begin(ctx, "send", { task_id: params.sessionId, prompt: params.task, agent: params.agent, sticky: true, cwd: ctx.cwd })
						: await begin(ctx, "start", {
								tasks: [{ name: params.agent, prompt: params.task, profile: params.agent, cwd: ctx.cwd }],
								// The SingleResult contract: this tool runs read-only agents unless
								// subagents.allowWrite is set.
								tool: "subagent",
							});
					const env = await follow(started, { signal, onUpdate, progress: progressOf });
					const r = subagentResult(env, params.agent, params.task, await fullOutput(env));
					return failedResult(env) || items(env).length === 0 ? failed(callId, text(r.text, r.details)) : text(r.text, r.details);
				} catch (e) {
					// The SingleResult contract: failures come back as a result with details.error.
					const err = codeOf(e);
					return failed(callId, text(err.message, { mode: "single", results: [], error: subagentError(err.code, err.message) }));
				}
			},
		});
		registered.add("subagent");
	}

	// --- task (the task contract) and primary profiles ---
	async function runTask(
		op: string,
		params: {
			subagent_type?: string;
			description?: string;
			prompt?: string;
			cwd?: string;
			tasks?: Array<{ subagent_type: string; description?: string; prompt: string; cwd?: string }>;
			parallel?: boolean;
			async?: boolean;
			id?: string;
			ids?: string[];
			timeout_ms?: number;
			plan?: unknown;
			args?: Record<string, string>;
			context?: "fresh" | "fork";
			worktree?: boolean;
			discard?: boolean;
			message?: string;
			schedule?: unknown;
		},
		invocation: string,
		callId: string,
		signal: AbortSignal | undefined,
		onUpdate: Update,
		ctx: ExtensionContext,
	) {
		await startUpDone();
		const progress = (env: Envelope) => ({ text: planHeader(env) + items(env).map((it) => taskTree(it)).join("\n"), details: taskDetails(op, env, invocation) });
		const ids = params.ids?.length ? params.ids : params.id ? [params.id] : [];
		let env: Envelope;
		let said: string | undefined;
		switch (op) {
			case "start": {
				if (params.plan !== undefined && params.plan !== null) {
					env = await delegate(ctx, planRequest(ctx, params.plan, params.args, params.cwd), { signal, onUpdate, async: params.async, progress });
					break;
				}
				const list = params.tasks?.length
					? params.tasks
					: [{ subagent_type: params.subagent_type ?? "", description: params.description, prompt: params.prompt ?? "", cwd: params.cwd }];
				for (const t of list) {
					// An empty prompt in a batch is that item's error alone
					// (the task contract); the service rejects it and runs the others.
					if (!t.subagent_type || (list.length === 1 && !t.prompt?.trim())) {
						throw new SubagentsError("INVALID_INPUT", "start needs subagent_type and prompt for every task");
					}
				}
				env = await delegate(
					ctx,
					{
						tasks: list.map((t) => ({
							name: t.description || t.subagent_type,
							description: t.description,
							prompt: t.prompt,
							profile: t.subagent_type,
							cwd: t.cwd || ctx.cwd,
							context: params.context,
							worktree: params.worktree || undefined,
						})),
						max_concurrency: list.length > 1 && !params.parallel ? 1 : undefined,
						tool: "task",
						parent_session_file: params.context === "fork" ? ctx.sessionManager.getSessionFile() : undefined,
					},
					{ signal, onUpdate, async: params.async, progress },
				);
				break;
			}
			case "status":
			case "result":
				if (!ids.length) throw new SubagentsError("INVALID_INPUT", `${op} needs id or ids`);
				env = await cli().call("status", [], ids);
				break;
			case "wait": {
				if (!ids.length) throw new SubagentsError("INVALID_INPUT", "wait needs id or ids");
				const update = throttled(onUpdate);
				env =
					ids.length === 1
						? await cli().follow(
								ids[0],
								(e) => {
									const p = progress(e);
									update(p.text, p.details);
								},
								signal,
								params.timeout_ms,
							)
						: await cli().call("wait", params.timeout_ms ? ["--timeout-ms", String(params.timeout_ms)] : [], ids, undefined, signal);
				break;
			}
			case "send": {
				if (!params.id || !params.prompt?.trim()) throw new SubagentsError("INVALID_INPUT", "send needs id and prompt");
				const sent = await begin(ctx, "send", { task_id: params.id, prompt: params.prompt });
				env = await follow(sent.delegation_id ? sent : { ...sent, task_id: params.id }, { signal, onUpdate, async: params.async, progress });
				break;
			}
			case "cancel":
				if (!ids.length) throw new SubagentsError("INVALID_INPUT", "cancel needs id or ids");
				env = await cli().call("cancel", [], ids);
				break;
			case "reply": {
				if (!params.id || !params.message?.trim()) throw new SubagentsError("INVALID_INPUT", "reply needs the asking task's id and your answer in message");
				env = await cli().call("reply", ["--by", delivery.delivering(ctx)], [params.id, params.message]);
				break;
			}
			case "apply": {
				if (!ids.length) throw new SubagentsError("INVALID_INPUT", "apply needs the id of a task (or plan) that ran in a worktree");
				env = await cli().call("apply", params.discard ? ["--discard"] : [], ids);
				break;
			}
			case "resume": {
				if (!params.id) throw new SubagentsError("INVALID_INPUT", "resume needs the plan's id");
				const changed = params.plan === undefined || params.plan === null ? undefined : planDocument(params.plan);
				if (typeof changed === "string") throw new SubagentsError("INVALID_INPUT", "resume takes the changed plan document, not a saved plan's name");
				const input = changed !== undefined || params.args ? { plan: changed, args: params.args } : undefined;
				const resumed = await delivery.own(cli().call("resume", [], [params.id], input));
				env = await follow(resumed, { signal, onUpdate, async: params.async, progress });
				break;
			}
			case "schedule": {
				({ env, text: said } = await scheduleOp(cli(), ctx, params.schedule));
				break;
			}
			default:
				throw new SubagentsError("INVALID_INPUT", `unknown op ${op}`);
		}
		// A start, send or wait answers with the work's end: a task in it that
		// failed, was refused, timed out or was cancelled makes the result an
		// error. A status or cancel answers its question, whatever the state.
		const isFailure = ((op === "start" || op === "send" || op === "wait") && failedResult(env)) || (op === "apply" && (env.status === "conflict" || env.status === "failed"));
		const done = <R>(r: R) => (isFailure ? failed(callId, r) : r);
		const details = taskDetails(op === "result" ? "status" : op, env, invocation);
		let body =
			said !== undefined
				? said
				: op === "apply"
				? (env.text ?? env.status ?? "")
				: op === "reply"
					? `Answered: the child of ${params.id} goes on with your answer; its result comes into this session when it ends.`
					: planHeader(env) + items(env).map((it) => taskTree(it, op === "start" ? params.prompt : undefined)).join("\n\n");
		if (op === "start" && params.async) {
			body = env.plan
				? `${planHeader(env)}Started the plan in the background: its result is delivered into this session when it ends; task op:"status", op:"wait" or op:"cancel" with id ${env.delegation_id} looks at it now.`
				: `Started ${items(env).length} task(s) in the background: ${items(env).map((it) => it.task_id).join(", ")}. Their results are delivered into this session when they finish; task op:"status" or op:"wait" with a task_id looks at them now.`;
		}
		if (op === "wait" && (env.wait_status === "timeout" || env.wait_status === "aborted")) {
			// The task contract makes an unfinished wait an explicit error; the
			// tasks' state is in the details all the same.
			const code = env.wait_status === "timeout" ? "task_wait_timeout" : "task_wait_aborted";
			const message = env.wait_status === "timeout" ? "the task is still running: wait again, or look with op \"status\"" : "waiting was aborted (the task goes on)";
			return failed(callId, text(`Error (${code}): ${message}\n${body}`, {
				...details,
				error: { code, message, unified_code: env.wait_status === "timeout" ? "SUBAGENT_TIMEOUT" : "CANCELLED" },
				error_category: env.wait_status === "timeout" ? "timeout" : "runtime",
			}));
		}
		return done(text(body, details));
	}

	/**
	 * A plan's start request: a saved plan by name or a document, run in
	 * cwd; the parent's session file is what steps with context fork start
	 * from. It goes through `start --input` as a task start does.
	 */
	function planRequest(ctx: ExtensionContext, plan: unknown, args: Record<string, string> | undefined, cwd: string | undefined) {
		const doc = planDocument(plan);
		const where = { cwd: cwd || ctx.cwd, args, tool: "task", parent_session_file: ctx.sessionManager.getSessionFile() };
		return typeof doc === "string" ? { name: doc, ...where } : { plan: doc, ...where };
	}

	/** A plan as the model gave it: a document, a saved plan's name, or a document written as a JSON string. */
	function planDocument(plan: unknown): unknown {
		if (typeof plan !== "string" || !plan.trim().startsWith("{")) return plan;
		try {
			return JSON.parse(plan);
		} catch {
			throw new SubagentsError("INVALID_INPUT", "plan is neither a saved plan's name nor a JSON plan document");
		}
	}

	function taskError(callId: string, op: string, e: unknown, signal?: AbortSignal) {
		let err = codeOf(e);
		// A wait the caller's turn aborted is the task contract's task_wait_aborted,
		// whatever the connection said on its way down.
		if (op === "wait" && signal?.aborted) err = { code: "CANCELLED", message: "waiting was aborted (the task goes on)", category: "runtime" };
		const seed = taskErrorCode(op, err.code);
		return failed(
			callId,
			text(`Error (${seed.code}): ${err.message}`, {
				contract_version: "task.v1",
				op,
				backend: "temporal",
				error: { code: seed.code, message: err.message, unified_code: err.code },
				error_category: seed.category ?? err.category,
			}),
		);
	}

	if (settings.tools.task) {
		pi.registerTool({
			name: "task",
			label: "Task",
			description:
				'Run subagent tasks as durable Temporal workflows. op "start" runs one task (subagent_type, description, prompt) or tasks[] (parallel: true to run them at once) and waits for the result; async: true returns at once and delivers the result into this session later. op "status"/"wait"/"cancel" take id or ids (wait: timeout_ms); op "send" sends a follow-up prompt to a task.',
			parameters: TaskParams,
			async execute(callId, params, signal, onUpdate, ctx) {
				const op = params.op ?? "start";
				try {
					return await runTask(op, params, "task-routed", callId, signal, onUpdate, ctx);
				} catch (e) {
					return taskError(callId, op, e, signal);
				}
			},
		});
		registered.add("task");
	}

	/**
	 * The profiles for cwd: from the service, remembered in the data dir; at
	 * pi's start with no service running, what was remembered (no process
	 * is started for it; the service refreshes it once it runs).
	 */
	async function profilesFor(cwd: string, passive: boolean): Promise<ProfileSummary[]> {
		const local = localService(settings);
		try {
			type Listing = { profiles: ProfileSummary[]; watched?: Watch[] };
			const list = await cli(passive)
				.call<Listing>("profiles", ["--cwd", cwd, ...(local ? ["--watched"] : [])])
				.catch((e) => {
					// A service older than --watched: its listing serves, asked again at each start.
					if (local && e instanceof SubagentsError && /-watched/.test(e.message)) return cli(passive).call<Listing>("profiles", ["--cwd", cwd]);
					throw e;
				});
			if (local) rememberProfiles(local.dataDir, cwd, list.profiles ?? [], list.watched);
			return list.profiles ?? [];
		} catch (e) {
			if (e instanceof SubagentsError && e.notRunning && local) return rememberedProfiles(local.dataDir, cwd)?.profiles ?? [];
			throw e;
		}
	}

	/**
	 * Registers a tool per primary profile of the folder. At pi's start
	 * (passive) the last listing of the folder serves at once, without a
	 * call on pi's start path; only when a folder or file it was read from
	 * has changed since does a listing in the background add what changed.
	 */
	async function registerPrimaryTools(ctx: ExtensionContext, passive = false) {
		if (!settings.tools.primary) return;
		const remembered = passive ? rememberedPrimary(ctx.cwd) : undefined;
		if (!remembered) {
			const listed = profilesFor(ctx.cwd, passive).then(registerPrimary);
			primaryListing = listed.catch(() => {});
			await listed;
			return;
		}
		registerPrimary(remembered.profiles);
		if (unchanged(remembered.watched)) return;
		// Beside pi's start, before a delegation of this session (which
		// waits for it) and the session's first prompt (primaryListing).
		primaryListing = profilesFor(ctx.cwd, true).then(registerPrimary, () => {
			/* not running, or not now: the remembered listing stays */
		});
		await primaryListing;
	}

	/**
	 * The folder's primary profiles being listed at the session's start:
	 * none was remembered, or a file or folder the remembered listing was
	 * read from changed since (a profile added, the project trusted). The
	 * first prompt waits for it, so that the model has the folder's primary
	 * tools from its first call; an unchanged folder's start lists nothing
	 * and waits for nothing.
	 */
	let primaryListing: Promise<void> | undefined;

	/** cwd's remembered listing, when this is the local service's. */
	function rememberedPrimary(cwd: string) {
		const local = localService(settings);
		return local ? rememberedProfiles(local.dataDir, cwd) : undefined;
	}

	function registerPrimary(profiles: ProfileSummary[]) {
		for (const p of profiles) {
			if (!p.primary || p.error || p.internal) continue;
			if (registered.has(`primary:${p.name}`)) continue;
			const name = primaryToolName(p.name, registered);
			registered.add(name);
			registered.add(`primary:${p.name}`);
			const usesQuery = p.name === "librarian" || p.name === "finder";
			const fields: Record<string, ReturnType<typeof Type.String> | ReturnType<typeof Type.Optional>> = {};
			if (usesQuery) fields.query = Type.String({ description: "What to find or understand" });
			else fields.task = Type.String({ description: "What to work on" });
			if (p.name !== "finder") fields.context = Type.Optional(Type.String({ description: "Background the subagent needs" }));
			if (p.name === "oracle") fields.files = Type.Optional(Type.Array(Type.String(), { description: "Paths the subagent should look at" }));
			fields.description = Type.Optional(Type.String({ description: "Short label of the task" }));
			fields.async = Type.Optional(Type.Boolean({ description: "Return at once; the result is delivered later" }));
			pi.registerTool({
				name,
				label: p.name,
				description: `${p.description || `The ${p.name} subagent`} (runs as a durable subagent; same result envelope as task).`,
				parameters: Type.Object(fields),
				async execute(callId, params: Record<string, unknown>, signal, onUpdate, c) {
					const ask = String(params.query ?? params.task ?? "");
					const prompt = primaryPrompt(ask, params.context as string | undefined, params.files as string[] | undefined);
					try {
						return await runTask(
							"start",
							{ subagent_type: p.name, description: params.description as string | undefined, prompt, async: params.async as boolean | undefined },
							"primary-tool",
							callId,
							signal,
							onUpdate,
							c,
						);
					} catch (e) {
						return taskError(callId, "start", e, signal);
					}
				},
			});
		}
	}

	// --- delegate_to_subagents and friends (the delegate contract) ---
	if (settings.tools.delegate) {
		pi.registerTool({
			name: "delegate_to_subagents",
			label: "Delegate to subagents",
			description:
				"Spawn one or more parallel sub-agents (1-16 tasks, at most 4 at once) as durable Temporal workflows. Returns a summary line with the session ID of each task; read results with get_subagent_output or get_subagent_session.",
			parameters: DelegateParams,
			async execute(callId, params, signal, onUpdate, ctx) {
				const env = await delegate(
					ctx,
					// tool "delegate": a child's last text is its result (the
					// delegate contract), finalize only where its profile asks.
					{ tasks: params.tasks.map((t) => ({ ...t, cwd: t.cwd || ctx.cwd })), profile: params.profile, tool: "delegate" },
					{ signal, onUpdate, progress: (e) => ({ text: progressText(e, settings.maxLinesPerWindow), details: delegateResult(e, settings.maxLinesPerWindow).details }) },
				);
				const r = delegateResult(env, settings.maxLinesPerWindow);
				return failedResult(env) ? failed(callId, text(r.text, r.details)) : text(r.text, r.details);
			},
			renderCall(args, theme) {
				const profiles = [...new Set(args.tasks.map((t) => t.profile).filter(Boolean))];
				let s = `${theme.fg("toolTitle", theme.bold("delegate_to_subagents"))} ${args.tasks.length} sub-agent${args.tasks.length === 1 ? "" : "s"}`;
				if (args.profile) s += ` (default profile: ${args.profile})`;
				if (profiles.length) s += ` profiles: [${profiles.join(", ")}]`;
				// Until the TUI module is in, pi draws its own fallback.
				if (!tui) throw new Error("the TUI module is still loading");
				return new tui.Text(s, 0, 0);
			},
			renderResult(result, { expanded }, theme) {
				if (!tui) throw new Error("the TUI module is still loading");
				const d = result.details as ReturnType<typeof delegateResult>["details"] | undefined;
				if (!d?.windows) return new tui.Text(resultText(result), 0, 0);
				return new tui.Text(renderDelegation(d.windows, { expanded, maxLines: d.maxLinesPerWindow, done: d.status === "done" }, theme), 0, 0);
			},
		});

		// The delegate contract's truncating renderer of the retrieval tools.
		const truncating = (result: { content: Array<{ type: string; text?: string }>; details?: unknown }, expanded: boolean, theme: Style) => {
			if (!tui) throw new Error("the TUI module is still loading");
			const maxLines = (result.details as { maxLines?: number } | undefined)?.maxLines ?? settings.maxLinesPerWindow;
			return new tui.Text(renderTruncated(resultText(result), { expanded, maxLines }, theme), 0, 0);
		};

		const seedStatus = (env: Envelope) => {
			const it = items(env)[0];
			if (!it || !it.done) return "running";
			return succeeded(it) ? "completed" : "error";
		};

		pi.registerTool({
			name: "get_subagent_output",
			label: "Sub-agent output",
			description: "Retrieve the final output of a sub-agent session (its latest run).",
			parameters: SessionParams,
			async execute(_id, params) {
				// The delegate contract gives the model the whole text (the renderer
				// shows maxLinesPerWindow lines): as much as one read holds (1 MiB).
				const env = await cli()
					.call("output", ["--full", "--from", "0"], [params.sessionId])
					.catch((e) => {
						throw codeOf(e).code === "SESSION_NOT_FOUND" ? new Error(sessionNotFound(params.sessionId)) : e;
					});
				const it = items(env)[0];
				return text(env.text ?? "(no text output from sub-agent)", {
					sessionId: params.sessionId,
					status: seedStatus(env),
					taskName: it?.name,
					runCount: env.run_count ?? 1,
					maxLines: settings.maxLinesPerWindow,
				});
			},
			renderResult: (result, { expanded }, theme) => truncating(result, expanded, theme),
		});

		pi.registerTool({
			name: "get_subagent_session",
			label: "Sub-agent session",
			description: "Retrieve the complete transcript of a sub-agent session: messages, tool calls and tool results of every run.",
			parameters: SessionParams,
			async execute(_id, params) {
				const env = await cli()
					.call("transcript", [], [params.sessionId])
					.catch((e) => {
						throw codeOf(e).code === "SESSION_NOT_FOUND" ? new Error(sessionNotFound(params.sessionId)) : e;
					});
				const it = items(env)[0];
				return text(env.text ?? "", {
					sessionId: params.sessionId,
					status: seedStatus(env),
					taskName: it?.name,
					messageCount: env.message_count ?? 0,
					exitCode: it?.exit_code ?? 0,
					model: it ? modelLabel(it) : undefined,
					runCount: env.run_count ?? 1,
					maxLines: settings.maxLinesPerWindow,
				});
			},
			renderResult: (result, { expanded }, theme) => truncating(result, expanded, theme),
		});

		pi.registerTool({
			name: "list_subagent_profiles",
			label: "Sub-agent profiles",
			description: "List the named sub-agent profiles delegate_to_subagents can use.",
			parameters: Type.Object({}),
			async execute(_id, _params, _signal, _onUpdate, ctx) {
				const list = await cli().call<{ profiles: ProfileSummary[]; plans?: Array<{ name: string; summary: string }> }>("profiles", ["--cwd", ctx.cwd]);
				const profiles = list.profiles ?? [];
				// Saved plans are listed with the profiles: the task tool runs
				// one by name (plan: NAME, args).
				const plans = list.plans ?? [];
				const planText = plans.length ? `\n\nSaved plans (task tool: plan: NAME, args):\n${plans.map((p) => p.summary).join("\n")}` : "";
				if (profiles.length === 0) return text(NO_PROFILES_TEXT + planText, { count: 0 });
				return text(profiles.map((p) => p.summary).join("\n") + planText, {
					count: profiles.length,
					profiles: Object.fromEntries(profiles.map((p) => [p.name, p.summary])),
					...(plans.length ? { plans: Object.fromEntries(plans.map((p) => [p.name, p.summary])) } : {}),
				});
			},
		});
	}

	// The primary tools pi's start would register from the remembered
	// listing are registered here, while pi loads extensions: a tool
	// registered after the session started makes pi rebuild its tool
	// registry and system prompt once per tool.
	if (settings.tools.primary) registerPrimary(rememberedPrimary(process.cwd())?.profiles ?? []);

	// --- commands ---
	registerFleet(pi, { cli, delivery, loadTui: host.loadTui });
	registerDoctor(pi, cli);
	pi.registerCommand("subagent", {
		description: "One task, session or delegation in detail: /subagent <id>",
		handler: async (args, ctx) => {
			const id = args.trim();
			if (!id) {
				ctx.ui.notify("usage: /subagent <task, session or delegation ID>", "warning");
				return;
			}
			try {
				const env = await cli().call("status", [], [id]);
				const body = items(env).map((it) => `${taskTree(it)}${it.ui_url ? `\n  ${it.ui_url}` : ""}`);
				ctx.ui.notify([env.delegation_id ? `${env.delegation_id} · ${env.status}${env.ui_url ? ` · ${env.ui_url}` : ""}` : "", ...body].filter(Boolean).join("\n"), "info");
			} catch (e) {
				ctx.ui.notify(codeOf(e).message, "error");
			}
		},
	});

	pi.registerCommand("subagents-adopt", {
		description: "Take into this session the results of earlier pi sessions of this folder that nobody waits for: /subagents-adopt [session ID]",
		handler: async (args, ctx) => {
			const local = localService(settings);
			if (!local) {
				say(ctx, "subagents: /subagents-adopt needs the local service (a remote Temporal keeps no marks of who waits): continue the earlier session with pi --session FILE", "warning");
				return;
			}
			try {
				await startUpDone();
				const want = args.trim();
				const found = strays(local.dataDir, ctx.cwd, delivery.parent(ctx)).filter((s) => !want || s.id.startsWith(want));
				let taken = 0;
				let running = 0;
				const from: string[] = [];
				for (const s of found) {
					const r = await delivery.adopt(ctx, s);
					if (!r || r.taken === 0) continue;
					taken += r.taken;
					running += r.running;
					from.push(s.id);
				}
				say(ctx, adoptedLine(taken, running, from));
			} catch (e) {
				say(ctx, `subagents: /subagents-adopt: ${codeOf(e).message}`, "error");
			}
		},
	});

	// --- lifecycle: delivery of results, acknowledgements ---
	/**
	 * What a session does once the service answers: register the primary
	 * profiles' tools and deliver what earlier runs left. It never starts
	 * the service (only a delegation or an explicit command does, so a
	 * stopped one stays stopped): with none running, what earlier runs left
	 * waits in Temporal, and this runs again when this pi starts the
	 * service. passive (pi's start): the remembered listing of the primary
	 * profiles serves.
	 */
	async function startUp(ctx: ExtensionContext, passive: boolean) {
		// A child that delegates has the tools its profile listed, no
		// primary profile's, and looks for no other session's results: it
		// shares its folder with the pi that started it.
		const child = nestedParent() !== undefined;
		try {
			if (!child) await registerPrimaryTools(ctx, passive);
		} catch (e) {
			if (e instanceof SubagentsError && e.notRunning) return;
			warn(ctx, `subagents: primary profile tools not registered: ${codeOf(e).message}`);
		}
		if (current !== ctx) return;
		try {
			// Only a running service is asked: results wait until it runs.
			await delivery.resume(ctx);
			const running = delivery.running();
			// The terminal shows the fleet widget instead (docs/fleet.md).
			if (running.length && current === ctx && ctx.hasUI && ctx.mode !== "tui") ctx.ui.setStatus("subagents", `subagents: ${running.length} running`);
		} catch (e) {
			warn(ctx, `subagents: could not look for earlier delegations: ${codeOf(e).message}`);
		}
		if (current !== ctx || child) return;
		try {
			await lookForStrays(ctx);
		} catch (e) {
			warn(ctx, `subagents: could not look for results of earlier sessions: ${codeOf(e).message}`);
		}
	}

	/**
	 * Shows a warning in ctx's session while it is this extension's: once
	 * pi has shut it down (a print run that ended while the start-up work
	 * still waited on the service) pi refuses every use of it, and the
	 * warning has nobody to go to.
	 */
	function warn(ctx: ExtensionContext, message: string) {
		if (current === ctx && ctx.hasUI) ctx.ui.notify(message, "warning");
	}

	/** One line to the user: a notification where there is a UI, else stderr (print and JSON runs). */
	function say(ctx: ExtensionContext, line: string, level: "info" | "warning" | "error" = "info") {
		if (ctx.hasUI) ctx.ui.notify(line, level);
		else process.stderr.write(`${line}\n`);
	}

	/** The session whose start looked for results of other sessions: once per start. */
	let strayLookOf: string | undefined;

	/**
	 * Says at a session's start, in one line, that results of other
	 * sessions of this folder wait for nobody (their pi was killed, or
	 * closed with work running) and how to take them. It reads the marks'
	 * folder; only when a mark of this folder has no live pi does it ask
	 * the service what is still open, and only a service that runs: with
	 * none, it looks again when this pi starts the service.
	 */
	async function lookForStrays(ctx: ExtensionContext) {
		const local = localService(settings);
		const me = delivery.parent(ctx);
		if (!local || strayLookOf === me) return;
		const found = strays(local.dataDir, ctx.cwd, me);
		if (found.length === 0) return;
		let report: Awaited<ReturnType<typeof delivery.strayReport>>;
		try {
			report = await delivery.strayReport(found);
		} catch (e) {
			if (e instanceof SubagentsError && e.notRunning) return;
			throw e;
		}
		strayLookOf = me;
		// Not to a session pi has shut down meanwhile (it refuses every use of it).
		if (report.open > 0 && current === ctx) say(ctx, strayHint(report));
	}

	onServiceStarted(() => {
		if (current) {
			status("subagents service started");
			// In the background, beside the call that started the service,
			// after the start-up work under way: what waits for start-up
			// (a print run's settle) waits for this too. A failure here must
			// never end pi (an unhandled rejection would).
			const ctx = current;
			startedUp = startedUp.then(() => startUp(ctx, false)).catch(() => {
				/* the session ended meanwhile */
			});
		}
	});

	pi.on("session_start", async (_event, ctx) => {
		current = ctx;
		if (ctx.mode !== "tui" && ctx.mode !== "rpc") quickExit();
		if (ctx.hasUI) loadTui();
		settings = loadSettings(ctx.cwd);
		for (const w of settings.warnings) {
			if (ctx.hasUI) warn(ctx, w);
			else process.stderr.write(`${w}\n`);
		}
		// Before any look: a scheduled result says whether a session was open here when its run ended.
		delivery.opened(ctx);
		// A failure is reported in the session (warn); it never ends pi.
		startedUp = startUp(ctx, true).catch(() => {});
	});

	/** The session whose first prompt looked for questions that wait. */
	let questionLookOf: string | undefined;

	/** Where a questions look goes: the folder, and the service the settings name. */
	const questionsKey = (cwd: string) => JSON.stringify([cwd, localService(settings)?.dataDir, connectionFlags(settings)]);
	/** The questions that wait for cwd's tasks; undefined when no service answers. */
	const askQuestions = (cwd: string): Promise<Envelope | undefined> => cli(true).call("questions", ["--cwd", cwd]).catch(() => undefined);
	/**
	 * The look of the session about to start, asked as pi loads this
	 * extension (pi's folder, the settings loaded here): pi's own start
	 * (about 40 ms here) goes on meanwhile, and the first prompt does not
	 * wait for the socket's answer (issue 43: nothing at pi's start waits
	 * for a socket). A session of another folder or service asks again,
	 * and so does a first prompt that comes later than questionsAheadMs.
	 */
	let questionsAhead: { key: string; at: number; answer: Promise<Envelope | undefined> } | undefined = {
		key: questionsKey(process.cwd()),
		at: Date.now(),
		answer: askQuestions(process.cwd()),
	};

	/**
	 * Before a session's first prompt, tells its model of the questions that
	 * children of this folder's tasks wait to have answered (docs/questions.md):
	 * once per question in the session (its branch keeps the message), and
	 * only when the service runs (nothing waits otherwise).
	 */
	async function tellWaitingQuestions(ctx: ExtensionContext) {
		const me = delivery.parent(ctx);
		if (questionLookOf === me) return;
		questionLookOf = me;
		const ahead = questionsAhead;
		questionsAhead = undefined;
		const fresh = ahead && ahead.key === questionsKey(ctx.cwd) && Date.now() - ahead.at < questionsAheadMs;
		const env = await (fresh ? ahead.answer : askQuestions(ctx.cwd));
		if (!env) return;
		const told = toldInBranch(ctx);
		delivery.toldOf(told);
		for (const it of asking(env)) {
			if (told.has(questionKey(it))) continue;
			const d = questionDraft(it, "A subagent task of this folder waits for your answer.");
			delivery.toldOf([questionKey(it)]);
			sendDraft(pi, d, { deliverAs: "nextTurn" });
		}
	}

	pi.on("before_agent_start", async (_event, ctx) => {
		const listing = primaryListing;
		primaryListing = undefined;
		await listing;
		await tellWaitingQuestions(ctx).catch(() => {
			/* no service, or not now: the question still waits */
		});
		// A print or JSON run of a session that waits for results of an
		// earlier run (one killed, or stopped with Ctrl-C, before they came)
		// takes them before its prompt goes to the model: the model answers
		// the prompt with them in hand, and no turn of theirs follows the
		// answer (which -p prints). An interactive session gets them as they
		// come. A session that waits for nothing asks nothing here.
		// Results of this folder's scheduled runs (docs/schedules.md) come
		// before the prompt too: the model reads them with it.
		const pending = delivery.mayHavePending(ctx);
		if (interactive(ctx) || (!pending && !delivery.mayHaveScheduled(ctx))) return;
		await startUpDone();
		// Once more, in case the service came up since the start-up look
		// (which then found nothing): the results it missed would come after
		// the answer with no turn to read them (a look finds each delegation
		// once: arrive and watch keep one of each). It starts nothing: with
		// the service stopped, the results wait for a later start.
		await delivery.resume(ctx).catch(() => {
			/* no service: the results wait until it runs */
		});
		const waiting = delivery.waitingFor("earlier");
		if (waiting > 0) {
			say(ctx, `subagents: waiting for ${waiting} delegation${waiting === 1 ? "" : "s"} of an earlier run of this session before the prompt goes to the model (Ctrl-C leaves them for a later start)`);
			await delivery.settled("earlier", ctx.signal);
		}
		for (const origin of ["earlier", "scheduled"] as const) {
			for (const d of delivery.takeDrafts(false, origin).entries) {
				sendDraft(pi, d, { deliverAs: "nextTurn" });
			}
		}
	});

	pi.on("turn_end", async (_event, ctx) => {
		// The delivered results are in the session file: acknowledging them
		// goes on beside the next model call (agent_settled waits for it).
		void delivery.ackPersisted(ctx);
		const { entries, turn } = delivery.takeDrafts(interactive(ctx));
		if (entries.length) return turn ? { entries, continue: true } : { entries };
	});

	pi.on("agent_before_settle", async (_event, ctx) => {
		// Print and JSON modes end with the run: they wait here for the
		// background work this run's model started (async), so that its
		// results come back in this run, with a turn to read them. Results
		// of earlier runs came before the prompt (before_agent_start); any
		// that arrived since go into the session without a turn of their
		// own. An interactive session gets them as messages when they come.
		const endsWithRun = !interactive(ctx);
		if (endsWithRun) await startUpDone();
		const { entries, turn } = delivery.takeDrafts(!endsWithRun);
		let starts = turn;
		while (endsWithRun && !starts && delivery.waitingFor("own") > 0 && !ctx.signal?.aborted) {
			await delivery.nextResult(ctx.signal, "own");
			const more = delivery.takeDrafts(false);
			entries.push(...more.entries);
			starts = more.turn;
		}
		if (entries.length) return starts ? { entries, continue: true } : { entries };
	});

	pi.on("agent_settled", async (_event, ctx) => {
		await delivery.ackPersisted(ctx);
		delivery.flushIdle(ctx);
		if (ctx.hasUI && ctx.mode !== "tui") {
			const running = delivery.running();
			ctx.ui.setStatus("subagents", running.length ? `subagents: ${running.length} running` : undefined);
		}
	});

	pi.on("session_shutdown", async () => {
		shutDown = true;
		// Start-up work still under way (onServiceStarted) stops using it.
		current = undefined;
		delivery.shutdown();
		await stopServers();
	});
}
