// Pure formatting of `subagents --json` envelopes into the contracts' tool
// results. Nothing here imports pi, so `node --test` can check it alone.

/** Usage as the envelopes and the SingleResult contract carry it. */
export interface Usage {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	cost: number;
	turns: number;
}

export interface ToolRow {
	id: string;
	name: string;
	args: string;
	status: string;
	error?: string;
}

export interface ErrorInfo {
	code: string;
	message: string;
	category?: string;
}

/** One task of an envelope: a session's latest turn. */
export interface Item {
	/** The question the task's child waits to have answered (client.Item.Question). */
	question?: { id: string; reason: string; message: string; state: string; deadline?: string };
	/** What a task in a git worktree changed (client.Item.Change). */
	change?: { branch: string; patchFile: string; files?: string[]; empty?: boolean };
	task_id: string;
	index: number;
	name?: string;
	description?: string;
	agent: string;
	status: string;
	session_state?: string;
	/** A cancel's answer for the ID this item came from (the task contract). */
	cancel_applied?: boolean;
	prior_status?: string;
	done: boolean;
	turn?: number;
	attempts?: number;
	output: string;
	output_available: boolean;
	output_truncated: boolean;
	output_total_chars: number;
	output_returned_chars: number;
	finalize?: { status: string; result?: string; error?: string };
	error?: ErrorInfo;
	usage: Usage;
	exit_code: number;
	session_file?: string;
	artifact_file?: string;
	provider: string;
	model: string;
	thinking?: string;
	tool_rows?: ToolRow[];
	tool_count: number;
	event_count?: number;
	timeline?: Array<{ type: string; tool?: string; at_ms: number }>;
	last_text?: string;
	elapsed_ms: number;
	timeout_s?: number;
	ui_url?: string;
}

export interface ListItem {
	id: string;
	kind: string;
	name?: string;
	description?: string;
	delegation_id?: string;
	agent?: string;
	status?: string;
	execution_status: string;
	cwd?: string;
	parent_session_id?: string;
	open: boolean;
	started: string;
	closed?: string;
	ui_url?: string;
}

/** The one answer of every `subagents --json` call (contract subagents.v1). */
export interface Envelope {
	contract_version: string;
	op: string;
	backend: string;
	delegation_id?: string;
	task_id?: string;
	status?: string;
	done: boolean;
	wait_status?: string;
	cancel_applied?: boolean;
	prior_status?: string;
	accepted_turn?: number;
	total_count?: number;
	accepted_count?: number;
	rejected_count?: number;
	batch_status?: string;
	deliver?: boolean;
	delivered?: boolean;
	parent_session_id?: string;
	usage?: Usage;
	items?: Item[];
	runs?: ListItem[];
	count?: number;
	text?: string;
	text_truncated?: boolean;
	message_count?: number;
	run_count?: number;
	ui_url?: string;
	error?: ErrorInfo;
	/** A plan's own part: its steps as they stand (each step's result is its item). */
	plan?: PlanView;
}

/** A plan's view (client.Envelope.Plan, api.PlanView). */
export interface PlanView {
	name?: string;
	attempt: number;
	steps: StepState[];
	spentToolCalls: number;
	stopped?: ErrorInfo;
}

/** One task step of a plan (api.StepState). */
export interface StepState {
	key: string;
	path?: string[];
	agent?: string;
	state: string;
	sessionId?: string;
	round?: number;
	runs: number;
	gateRuns?: number;
	verdict?: string;
	reused?: boolean;
	error?: ErrorInfo;
}

/**
 * A plan's first lines in the task tool's text: its ID (status, wait,
 * cancel and resume take it), how far it is, and what stopped it; "" for
 * anything else.
 */
export function planHeader(env: Envelope): string {
	const plan = env.plan;
	if (!plan) return "";
	const done = plan.steps.filter((s) => s.state === "completed").length;
	const counts = ["running", "failed", "skipped", "cancelled"]
		.map((st) => [st, plan.steps.filter((s) => s.state === st).length] as const)
		.filter(([, n]) => n > 0)
		.map(([st, n]) => `${n} ${st}`);
	const head = `Plan ${plan.name || ""}${plan.name ? " " : ""}[plan_id: ${env.delegation_id}] · ${done}/${plan.steps.length} steps done${counts.length ? ` (${counts.join(", ")})` : ""}${plan.attempt > 1 ? ` · attempt ${plan.attempt}` : ""}`;
	const notes = plan.steps
		.filter((s) => (s.round ?? 0) > 1 || (s.gateRuns ?? 0) > 0 || s.verdict || s.reused)
		.map((s) => {
			const bits = [];
			if ((s.round ?? 0) > 0) bits.push(`round ${s.round}`);
			if (s.verdict) bits.push(`verdict ${s.verdict}`);
			if (s.gateRuns) bits.push(`gate ran ${s.gateRuns}×`);
			if (s.reused) bits.push("kept from an earlier attempt");
			return `  · ${[...(s.path ?? []), s.key].join("/")}: ${bits.join(", ")}`;
		});
	const stopped = plan.stopped ? [`  ✕ ${plan.stopped.code}: ${plan.stopped.message}`] : [];
	return [head, ...notes, ...stopped].join("\n") + "\n\n";
}

export interface ProfileSummary {
	name: string;
	scope: string;
	description?: string;
	model: string;
	tools: string[];
	primary?: boolean;
	internal?: boolean;
	summary: string;
	error?: string;
}

export const ZERO_USAGE: Usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0 };

export function items(env: Envelope): Item[] {
	return env.items ?? [];
}

export function succeeded(it: Item): boolean {
	return it.status === "completed" && it.finalize?.status !== "ERROR";
}

/** A task stopped by a cancel (the parent's Escape, `cancel`, Temporal's cancel). */
export function cancelled(it: Item): boolean {
	return it.status === "cancelled";
}

/**
 * The delegations whose final result a tool result holds (details.delegationIds):
 * env's once it is done. A result of work still running (an async start, a
 * wait that broke) holds none: its result is still to be delivered, and a
 * later start of the session must not take it for received (delivery.ts).
 */
export function heldDelegations(env: Envelope): string[] {
	return env.delegation_id && env.done ? [env.delegation_id] : [];
}

/** A task that ended without its answer: failed, refused, timed out, cancelled, terminated. */
export function ended(it: Item): boolean {
	return it.done && !succeeded(it);
}

/**
 * Whether a tool result holding env is an error for pi (isError): a task
 * in it ended without its answer, or a wait gave up before the work did.
 */
export function failedResult(env: Envelope): boolean {
	return items(env).some(ended) || env.wait_status === "timeout" || env.wait_status === "aborted";
}

/**
 * The model a task ran, as provider/id; undefined while nobody knows it.
 * An envelope names no model as "default" (the profile left it to pi,
 * and the child has not said which it took yet): that is never shown as
 * a model. The service may give the whole reference in model, the
 * provider beside it or not.
 */
export function modelParts(provider?: string, model?: string): { provider?: string; model?: string; label?: string } {
	const p = provider && provider !== "default" ? provider : "";
	const m = model && model !== "default" ? model : "";
	if (!m) return {};
	if (p && !m.startsWith(`${p}/`)) return { provider: p, model: m, label: `${p}/${m}` };
	const cut = m.indexOf("/");
	return cut > 0 ? { provider: m.slice(0, cut), model: m.slice(cut + 1), label: m } : { model: m, label: m };
}

/** The model label of a task: provider/id, or undefined when no model is known. */
export function modelLabel(it: Pick<Item, "provider" | "model">): string | undefined {
	return modelParts(it.provider, it.model).label;
}

/**
 * The text a task returns: its answer, or what went wrong and what it had.
 * output is what to show of its output (the SingleResult contract's cut text).
 */
export function itemText(it: Item, output = it.output): string {
	if (succeeded(it)) return output || "(no text output from sub-agent)";
	const parts: string[] = [];
	if (cancelled(it)) parts.push(`Task cancelled${it.error?.message ? ` (${it.error.message})` : ""}: it was stopped before it finished.`);
	else if (it.error) parts.push(`Error (${it.error.code}): ${it.error.message}`);
	else if (!it.done) parts.push(`Task still ${it.status} when this call returned.`);
	else parts.push(`Task ended with status ${it.status}.`);
	if (output) parts.push(`Partial output:\n${output}`);
	if (it.session_file) parts.push(`Session file: ${it.session_file}`);
	return parts.join("\n\n");
}

/**
 * The SingleResult contract names an unknown profile "agent"; the delegation reports the delegate
 * contract's "Unknown profile" text. The subagent tool speaks the SingleResult contract.
 */
export function agentErrorMessage(message: string): string {
	const m = /^Unknown profile: "([^"]*)"\. Available profiles: (.*)$/s.exec(message);
	return m ? `Unknown agent: ${m[1]}. Available agents: ${m[2]}` : message;
}

/**
 * One line of `/subagents`: a run's kind, ID, state and name. A session that is its own one-task
 * delegation (its delegation's ID is `delegation-<its id>`) reads as that delegation and its session.
 */
export function listLine(r: ListItem): string {
	const kind = r.kind === "session" && r.delegation_id === `delegation-${r.id}` ? `delegation ${r.delegation_id} · session` : r.kind;
	return `${kind} ${r.id} · ${r.status ?? r.execution_status}${r.name ? ` · ${r.name}` : ""}${r.ui_url ? `\n  ${r.ui_url}` : ""}`;
}

/**
 * details.runId: the SingleResult contract's 8-character ID of one execution.
 * A delegation's ID is a UUIDv7, whose leading digits are its start time
 * (shared by every run of the same minute) and whose last ones are random:
 * its last 8 hex digits name that run, and find it among `subagents list`'s
 * delegations. A turn with no delegation of its own (queued behind a running
 * turn) is named by its session and turn, hashed to the same form.
 */
export function runId(env: Envelope): string | undefined {
	const it = items(env)[0];
	const key = env.delegation_id ?? (it && `${it.task_id}#${it.turn ?? 0}`);
	if (!key) return undefined;
	return (/[0-9a-f]{8}$/i.exec(key)?.[0] ?? fnv1a(key)).toLowerCase();
}

/** FNV-1a's 32 bits of s, as 8 hex digits: a name of s, not a secret (no crypto module is loaded for it). */
function fnv1a(s: string): string {
	let h = 0x811c9dc5;
	for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
	return (h >>> 0).toString(16).padStart(8, "0");
}

/** The SingleResult contract's error codes: the only ones its details.error.code holds. */
const SINGLE_RESULT_CODES = new Set([
	"INVALID_INPUT",
	"SUBAGENTS_DISABLED",
	"UNKNOWN_AGENT",
	"SUBAGENT_DISABLED",
	"SUBAGENT_DEPTH_EXCEEDED",
	"SUBAGENT_TIMEOUT",
	"SUBAGENT_FAILED",
	"SUBAGENT_OUTPUT_TRUNCATED",
]);

/**
 * The SingleResult contract's code closest to one of ours (docs/errors.md):
 * a session the request names that is missing or busy is bad input, a
 * profile the permission policy denies is that agent disabled, and every
 * other way a run ends without its answer (no finalize, a loop, a cancel,
 * a terminate, the service out of reach) is the contract's SUBAGENT_FAILED.
 */
export function subagentErrorCode(code: string): string {
	if (SINGLE_RESULT_CODES.has(code)) return code;
	switch (code) {
		case "SESSION_NOT_FOUND":
		case "SESSION_RUNNING":
			return "INVALID_INPUT";
		case "PERMISSION_DENIED":
			return "SUBAGENT_DISABLED";
		default:
			return "SUBAGENT_FAILED";
	}
}

/** The subagent tool's details.error: the contract's code, ours beside it (as the task tool's unified_code). */
export function subagentError(code: string, message: string): { code: string; message: string; unified_code: string } {
	return { code: subagentErrorCode(code), message, unified_code: code };
}

/** A size as the SingleResult contract's truncation marker gives it. */
function sizeText(bytes: number): string {
	if (bytes < 1024) return `${bytes}B`;
	if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
	return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}

/**
 * The first max characters (code points, as the service counts them) of
 * text, ending where a line or word ends: the last line break in the kept
 * half, else the last space there, else (one token longer than half the
 * cap) at max itself. A text that is already a cut (cut) ends mid-word, so
 * it is cut back too.
 */
export function cutAtBoundary(text: string, max: number, cut = false): string {
	const chars = Array.from(text);
	if (chars.length <= max && !cut) return text;
	const kept = chars.slice(0, max).join("");
	const half = Math.floor(kept.length / 2);
	const line = kept.lastIndexOf("\n");
	const space = Math.max(kept.lastIndexOf(" "), kept.lastIndexOf("\t"));
	const end = line >= half ? line : space >= half ? space : kept.length;
	return kept.slice(0, end).trimEnd();
}

/**
 * content[0].text's output when the service cut it (the SingleResult contract cuts
 * only the text): the output cut to the service's cap where a line or word
 * ends, then the contract's truncation marker. full is the whole output the
 * service has; without it the counts are of characters.
 */
export function truncatedOutput(it: Item, full?: string): string {
	if (!it.output_truncated) return it.output;
	const source = full ?? it.output;
	const max = it.output_returned_chars || Array.from(it.output).length;
	const shown = cutAtBoundary(source, max, full === undefined);
	if (full !== undefined && shown === full) return full;
	const marker =
		full !== undefined
			? `[TRUNCATED: showing first ${shown.split("\n").length} of ${full.split("\n").length} lines, ${sizeText(Buffer.byteLength(shown))} of ${sizeText(Buffer.byteLength(full))}]`
			: `[TRUNCATED: showing first ${Array.from(shown).length} of ${it.output_total_chars} characters]`;
	return `${shown}\n${marker}`;
}

/** Whether a task's child ever ran: a refused task (unknown or denied profile, cancelled first) has none. */
export function childRan(it: Item): boolean {
	return (it.attempts ?? 0) > 0 || !!it.session_file || !it.done;
}

/** The sessions contract's finalized metadata: the child's status, its result, and an ERROR's error. */
export function finalizedOf(it: Item, full?: string) {
	const f = it.finalize;
	if (!f) return undefined;
	if (f.status === "ERROR") return { status: f.status, error: f.error ?? "", ...(f.result ? { result: f.result } : {}) };
	// A SUCCESS's output is its result: whole, when the service cut it.
	return { status: f.status, result: (it.output_truncated && full) || f.result || "" };
}

/** displayItems of the SingleResult contract: the tool calls, then the answer. */
export function displayItems(it: Item): Array<{ type: "text"; text: string } | { type: "toolCall"; name: string; args: Record<string, unknown> }> {
	const out: Array<{ type: "text"; text: string } | { type: "toolCall"; name: string; args: Record<string, unknown> }> = [];
	for (const row of it.tool_rows ?? []) {
		let args: Record<string, unknown> = {};
		try {
			const parsed = JSON.parse(row.args);
			if (parsed && typeof parsed === "object") args = parsed;
		} catch {
			args = { preview: row.args };
		}
		out.push({ type: "toolCall", name: row.name, args });
	}
	if (it.output) out.push({ type: "text", text: it.output });
	return out;
}

/**
 * The `subagent` tool's result (the sessions and SingleResult contracts).
 * full is the whole output the service has, read when it cut the envelope's.
 */
export function subagentResult(env: Envelope, agent: string, task: string, full?: string) {
	const it = items(env)[0];
	if (!it) {
		const message = env.error ? agentErrorMessage(env.error.message) : "The delegation ended without a task.";
		const error = subagentError(env.error?.code ?? "SUBAGENT_FAILED", message);
		return { text: message, details: { mode: "single" as const, results: [], error } };
	}
	const ok = succeeded(it);
	const unknown = it.error?.code === "UNKNOWN_AGENT";
	const error = it.error ? subagentError(it.error.code, unknown ? agentErrorMessage(it.error.message) : it.error.message) : undefined;
	// The SingleResult contract: a task that never ran (an unknown agent, any other refusal) has no
	// result and no run ID.
	const ran = childRan(it) && !unknown;
	const output = full ?? it.output;
	const result = {
		agent,
		task,
		// The SingleResult contract: a failed execution has a non-zero exitCode, also when pi
		// itself exited 0 (a provider error).
		exitCode: ok ? it.exit_code : it.exit_code || 1,
		usage: { ...ZERO_USAGE, ...it.usage },
		// Set on a failed execution only (a cut output is no failure: details.error says so).
		error: ok ? undefined : error?.message,
		sessionFile: it.session_file,
		// The whole sanitized output: the contract cuts only content[0].text.
		output,
		displayItems: displayItems(it),
		model: modelLabel(it),
	};
	const details = {
		mode: "single" as const,
		// The task's own state (the status vocabulary): completed, failed, cancelled, timed_out, ...
		status: it.status,
		runId: ran ? runId(env) : undefined,
		results: ran ? [result] : [],
		error,
		sessionId: it.task_id,
		delegationIds: heldDelegations(env),
		finalized: finalizedOf(it, full),
		uiUrl: it.ui_url,
	};
	if (unknown && error) return { text: error.message, details };
	const body = itemText(it, truncatedOutput(it, full));
	const text = `**Status:** ${ok ? "SUCCESS" : cancelled(it) ? "CANCELLED" : "ERROR"}\n**Session ID:** \`${it.task_id}\`\n\n---\n\n${body}`;
	return { text, details };
}

/**
 * The delegate contract's summary line of one task: its status, name, error
 * and session, then the profile it ran with (named, not pi's default) and
 * the model the child ran.
 */
export function summaryLine(it: Item): string {
	const name = it.name ?? it.task_id;
	const session = `(session: ${it.task_id})${profileInfo(it)}`;
	if (!it.done) return `… ${name}: ${it.status} ${session}`;
	if (it.status === "completed" && it.finalize?.status !== "ERROR") return `✓ ${name}: completed ${session}`;
	const msg = it.error?.message ?? it.finalize?.error ?? it.status;
	if (cancelled(it)) return `⊘ ${name}: cancelled — ${msg} ${session}`;
	return `✗ ${name}: error — ${msg} ${session}`;
}

/** A summary line's profile info: " (profile: P, model: provider/id:thinking)", nothing for pi's default profile. */
function profileInfo(it: Item): string {
	if (!it.agent || it.agent === "default") return "";
	const label = modelLabel(it);
	const model = label ? `, model: ${label}${it.thinking ? `:${it.thinking}` : ""}` : "";
	return ` (profile: ${it.agent}${model})`;
}

/** The delegate contract's global status header. */
export function statusHeader(list: Item[]): string {
	return statusLine(list.map(windowStatus));
}

function statusLine(statuses: Window["status"][]): string {
	const n = (s: Window["status"]) => statuses.filter((x) => x === s).length;
	// The delegate contract's three counts; cancelled ones are named only when there are some.
	return `Sub-agents: ${n("running")} running, ${n("done")} done, ${n("error")} error${n("cancelled") ? `, ${n("cancelled")} cancelled` : ""}`;
}

function windowStatus(it: Item): Window["status"] {
	return !it.done ? "running" : succeeded(it) ? "done" : cancelled(it) ? "cancelled" : "error";
}

/** A task as its window shows it (its lines aside). */
function windowOf(it: Item): Window {
	return {
		name: it.name ?? it.task_id,
		sessionId: it.task_id,
		profile: it.agent,
		...modelFields(it),
		thinking: it.thinking,
		status: windowStatus(it),
		toolCount: it.tool_count,
		elapsedMs: it.elapsed_ms,
		timeout: it.timeout_s,
		error: it.error?.message,
	};
}

/** provider and model of a task as its details carry them: the known model, else empty. */
function modelFields(it: Item): { provider: string; model: string } {
	const m = modelParts(it.provider, it.model);
	return { provider: m.provider ?? "", model: m.model ?? "" };
}

const WINDOW_ICONS: Record<Window["status"], [Parameters<Style["fg"]>[0], string]> = {
	running: ["warning", "⏳"],
	done: ["success", "✓"],
	error: ["error", "✗"],
	cancelled: ["warning", "⊘"],
};

/** A window's condensed header, in style. */
function windowTitle(w: Window, style: Style): string {
	const [color, glyph] = WINDOW_ICONS[w.status];
	const icon = style.fg(color, glyph);
	// The model the task ran; none shown while nobody knows it (never "default/default").
	const label = modelParts(w.provider, w.model).label;
	const model = label ? ` (${label}${w.thinking ? ` ${w.thinking}` : ""})` : w.thinking ? ` (thinking ${w.thinking})` : "";
	const time = w.timeout ? `${seconds(w.elapsedMs)}s/${w.timeout}s` : `${seconds(w.elapsedMs)}s`;
	return [`${icon} ${style.bold(w.name)}`, `${w.profile}${model}`, `${w.toolCount} tools`, time].join(" • ");
}

/** Text without styles, for what is not drawn in the terminal. */
const plain: Style = { fg: (_color, text) => text, bold: (text) => text };

function seconds(ms: number): number {
	return Math.floor(ms / 1000);
}

/** The delegate contract's condensed window header of one task. */
export function windowHeader(it: Item): string {
	return windowTitle(windowOf(it), plain);
}

/** The rolling progress text of a delegation: header, one window per task. */
export function progressText(env: Envelope, maxLines = 3): string {
	const list = items(env);
	const lines = [statusHeader(list)];
	for (const it of list) {
		lines.push(windowHeader(it));
		const rows = (it.tool_rows ?? []).slice(-maxLines);
		for (const row of rows) lines.push(`  ${toolRowText(row)}`);
		if (it.done && !succeeded(it) && it.error) lines.push(`  ${it.error.message}`);
	}
	const ids = list.filter((it) => it.done).map((it) => it.task_id);
	if (env.done && ids.length) lines.push(`Sessions: ${ids.join(", ")}`);
	return lines.join("\n");
}

/** A tool row, with the delegate contract's condensed ls and find. */
export function toolRowText(row: ToolRow): string {
	let args: Record<string, unknown> = {};
	try {
		args = JSON.parse(row.args);
	} catch {
		/* a cut preview: show it as it is */
	}
	const mark = row.status === "running" ? "·" : row.status === "error" ? "✗" : "✓";
	if (row.name === "ls" && typeof args.path === "string") return `${mark} ls → ${args.path}`;
	if (row.name === "find" && typeof args.pattern === "string") return `${mark} find → ${args.pattern}${typeof args.path === "string" ? ` in ${args.path}` : ""}`;
	return `${mark} ${row.name} ${oneLine(row.args, 80)}`;
}

export function oneLine(s: string, n: number): string {
	const flat = s.split(/\s+/).filter(Boolean).join(" ");
	return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
}

/** delegate_to_subagents' result (the delegate contract). */
export function delegateResult(env: Envelope, maxLines = 10) {
	const list = items(env);
	const text = list.map(summaryLine).join("\n");
	const details = {
		windows: list.map(
			(it): Window & { uiUrl?: string } => ({
				...windowOf(it),
				// What the window shows: the tool calls, then the answer.
				lines: [...(it.tool_rows ?? []).map(toolRowText), ...(it.done && it.output ? it.output.split("\n") : [])],
				uiUrl: it.ui_url,
			}),
		),
		maxLinesPerWindow: maxLines,
		status: env.done ? ("done" as const) : ("running" as const),
		sessionIds: list.map((it) => it.task_id),
		delegationIds: heldDelegations(env),
		uiUrl: env.ui_url,
	};
	return { text, details };
}

/** The task contract's task tree of one task, as the task tool prints it. */
export function taskTree(it: Item, prompt?: string): string {
	const icon = !it.done ? "⠋" : succeeded(it) ? "✓" : cancelled(it) ? "⊘" : "✕";
	const title = `${capitalize(it.agent)} · ${it.description ?? it.name ?? it.task_id}`;
	// The model needs the ID for status, wait, send and cancel.
	const lines = [`${icon} ${title} [task_id: ${it.task_id}]`];
	const rows: string[] = [];
	if (prompt) rows.push(oneLine(prompt, 100));
	for (const row of (it.tool_rows ?? []).slice(-6)) rows.push(toolRowText(row));
	if (it.change && !it.change.empty) {
		// A worktree task's result is a change to apply, not edits made in place.
		rows.push(`change on branch ${it.change.branch} (${(it.change.files ?? []).length} file(s)): task op "apply" with this task_id applies it`);
	}
	let last: string;
	if (!it.done && it.question) last = questionLine(it);
	else if (!it.done) last = it.last_text ? oneLine(it.last_text, 100) : "Working...";
	else if (succeeded(it)) last = it.output || "(no text output from sub-agent)";
	else if (cancelled(it)) last = `Task cancelled: ${it.error?.message ?? "stopped before it finished"}`;
	else last = `Task failed: ${it.error?.message ?? it.status}`;
	for (const r of rows) lines.push(`  ├── ${r}`);
	lines.push(`  ╰── ${last}`);
	return lines.join("\n");
}

/**
 * A task whose child waits for an answer (docs/questions.md): the question,
 * and how the parent answers it.
 */
export function questionLine(it: Item): string {
	const q = it.question!;
	return `Asks you (${q.reason}): ${q.message}\n      Answer with the task tool: op "reply", id "${it.task_id}", message: your answer. Its run waits until then${q.deadline ? ` (until ${q.deadline})` : ""}.`;
}

/** The items of env whose child waits for an answer. */
export function asking(env: Envelope): Item[] {
	return items(env).filter((it) => !it.done && it.question && (it.question.state === "pending" || !it.question.state));
}

function capitalize(s: string): string {
	return s ? s[0].toUpperCase() + s.slice(1) : s;
}

/** The task contract's envelope fields for one task item. */
export function taskItem(it: Item, invocation: string) {
	return {
		task_id: it.task_id,
		status: it.status,
		done: it.done,
		subagent_type: it.agent,
		description: it.description ?? it.name,
		output_available: it.output_available,
		output: it.output,
		output_truncated: it.output_truncated,
		output_total_chars: it.output_total_chars,
		output_returned_chars: it.output_returned_chars,
		error: it.error && { ...it.error, code: taskErrorCode("start", it.error.code).code, unified_code: it.error.code },
		error_category: it.error?.category,
		tool_rows: it.tool_rows ?? [],
		event_count: it.event_count ?? 0,
		timeline: it.timeline,
		assistant_text: it.last_text ?? (it.done ? it.output : ""),
		usage: it.usage,
		provider: modelParts(it.provider, it.model).provider,
		model: modelParts(it.provider, it.model).model,
		runtime: "pi-cli",
		route: "temporal",
		backend: "temporal",
		invocation,
		session_state: it.session_state,
		cancel_applied: it.cancel_applied,
		prior_status: it.prior_status,
		ui_url: it.ui_url,
	};
}

/**
 * The task contract's code for a failure of the task tool, where that contract names
 * one (README: "The task tool's error codes"); else the unified code.
 */
export function taskErrorCode(op: string, code: string): { code: string; category?: string } {
	switch (code) {
		case "PERMISSION_DENIED":
			return { code: "task_permission_denied", category: "permission" };
		case "SESSION_NOT_FOUND":
			return { code: "task_expired", category: "not_found" };
		case "CANCELLED":
			return op === "wait" ? { code: "task_wait_aborted", category: "runtime" } : { code };
		default:
			return { code };
	}
}

/** The task tool's details (the task contract, contract task.v1). */
export function taskDetails(op: string, env: Envelope, invocation: string) {
	const list = items(env);
	const first = list[0];
	return {
		contract_version: "task.v1",
		op,
		backend: "temporal",
		runtime: "pi-cli",
		route: "temporal",
		invocation,
		provider: first && modelParts(first.provider, first.model).provider,
		model: first && modelParts(first.provider, first.model).model,
		task_id: list.length === 1 ? first.task_id : undefined,
		status: list.length === 1 ? first.status : env.status,
		subagent_type: list.length === 1 ? first.agent : undefined,
		description: list.length === 1 ? (first.description ?? first.name) : undefined,
		done: env.done,
		wait_status: env.wait_status,
		cancel_applied: env.cancel_applied,
		prior_status: env.prior_status,
		total_count: env.total_count,
		accepted_count: env.accepted_count,
		rejected_count: env.rejected_count,
		batch_status: env.batch_status,
		output_available: list.length === 1 ? first.output_available : undefined,
		output: list.length === 1 ? first.output : undefined,
		output_truncated: list.length === 1 ? first.output_truncated : undefined,
		output_total_chars: list.length === 1 ? first.output_total_chars : undefined,
		output_returned_chars: list.length === 1 ? first.output_returned_chars : undefined,
		items: list.map((it) => taskItem(it, invocation)),
		delegationIds: heldDelegations(env),
		ui_url: env.ui_url,
		plan: env.plan,
	};
}

/** The message that brings background results into the parent session; what names them (the delegation's ID, or a turn's words). */
export function deliveryText(env: Envelope, what = env.delegation_id): string {
	const list = items(env);
	const lines = [`Background sub-agent results (${what}):`];
	for (const it of list) {
		lines.push("", summaryLine(it));
		const body = succeeded(it) ? it.output : itemText(it);
		if (body) lines.push(body);
	}
	return lines.join("\n");
}

/** What a look for results of other sessions found: sessions, their delegations still open, the newest start. */
export interface StrayReport {
	sessions: Array<{ id: string; session?: string; open: number; running: number }>;
	open: number;
	running: number;
	/** When the newest of their open delegations started (the list's started). */
	latest?: string;
}

/** A time as the hint shows it: local, to the minute. */
export function shortTime(iso: string | undefined, now = new Date()): string | undefined {
	if (!iso) return undefined;
	const t = new Date(iso);
	if (Number.isNaN(t.getTime())) return undefined;
	const pad = (n: number) => String(n).padStart(2, "0");
	const hm = `${pad(t.getHours())}:${pad(t.getMinutes())}`;
	const day = `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}`;
	const today = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
	return day === today ? `today ${hm}` : `${day} ${hm}`;
}

/**
 * The one line a session's start says when results of other sessions of
 * its folder wait for nobody: how many, from when, how to take them.
 */
export function strayHint(r: StrayReport, now = new Date()): string {
	const n = r.open;
	const s = r.sessions.length;
	const when = shortTime(r.latest, now);
	const facts = [when && `the latest started ${when}`, r.running > 0 && `${r.running} still running`].filter(Boolean).join(", ");
	return `subagents: ${n} delegation${n === 1 ? "" : "s"} of ${s === 1 ? "an earlier pi session" : `${s} earlier pi sessions`} in this folder wait${n === 1 ? "s" : ""} for nobody${facts ? ` (${facts})` : ""}: /subagents-adopt takes ${n === 1 ? "its result" : "their results"} into this session`;
}

/** What /subagents-adopt answers. */
export function adoptedLine(taken: number, running: number, from: string[]): string {
	if (taken === 0) return "subagents: nothing to take: no earlier pi session of this folder has results that nobody waits for";
	const still = running > 0 ? `; ${running} still running, ${running === 1 ? "its result comes" : "their results come"} when done` : "";
	return `subagents: took ${taken} delegation${taken === 1 ? "" : "s"} of ${from.join(", ")} into this session${still}`;
}

/** The delegate contract's empty profile list text. */
export const NO_PROFILES_TEXT = "No subagent profiles found. Add .md files to ~/.pi/agent/agent-profiles/ or .pi/agent-profiles/.";

/** The delegate contract's not-found text of get_subagent_output and get_subagent_session. */
export function sessionNotFound(id: string): string {
	return `Session "${id}" not found. The session may have expired or the ID is incorrect.`;
}

/**
 * A primary profile's tool name: its ID in [a-z0-9_], suffixed when it
 * collides with a tool that exists (the task contract: deterministic collision
 * handling).
 */
export function primaryToolName(profile: string, taken: Set<string>): string {
	const base = profile.toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/^_+|_+$/g, "") || "subagent";
	let name = base;
	if (taken.has(name)) name = `${base}_subagent`;
	for (let i = 2; taken.has(name); i++) name = `${base}_subagent_${i}`;
	return name;
}

/** The task contract's primary-tool prompt: the ask, then Context: and Files: blocks. */
export function primaryPrompt(ask: string, context?: string, files?: string[]): string {
	const parts = [ask.trim()];
	if (context?.trim()) parts.push(`Context:\n${context.trim()}`);
	if (files?.length) parts.push(`Files:\n${files.map((f) => `- ${f}`).join("\n")}`);
	return parts.join("\n\n");
}

/** The text of a tool result, its text parts joined. */
export function resultText(result: { content: Array<{ type: string; text?: string }> }): string {
	return result.content
		.filter((c) => c.type === "text")
		.map((c) => c.text ?? "")
		.join("\n");
}

/** The two styles the renderers use from pi's theme. */
export interface Style {
	fg(color: "muted" | "error" | "success" | "warning" | "accent" | "dim", text: string): string;
	bold(text: string): string;
}

/** A window of delegate_to_subagents, as its details keep it for the TUI. */
export interface Window {
	name: string;
	sessionId: string;
	profile: string;
	provider: string;
	model: string;
	thinking?: string;
	status: "running" | "done" | "error" | "cancelled";
	toolCount: number;
	elapsedMs: number;
	/** The task's own timeout: shown as given, also after an extension. */
	timeout?: number;
	error?: string;
	/** Every captured line of the window (tool rows, then the answer). */
	lines?: string[];
}

/**
 * The delegate contract's rendering of delegate_to_subagents: the status header, one
 * window per task with its condensed header and, collapsed, its latest
 * maxLines lines ("... (N more lines)" above them), expanded all of them;
 * the error beneath; the session IDs once every task is done.
 */
export function renderDelegation(windows: Window[], opts: { expanded: boolean; maxLines: number; done: boolean }, style: Style): string {
	const out = [statusLine(windows.map((w) => w.status))];
	for (const w of windows) {
		out.push(windowTitle(w, style));
		const lines = w.lines ?? [];
		const shown = opts.expanded ? lines : lines.slice(-opts.maxLines);
		if (shown.length < lines.length) out.push(style.fg("dim", `  ... (${lines.length - shown.length} more lines)`));
		for (const l of shown) out.push(style.fg("muted", `  ${l}`));
		if (w.status === "error" && w.error) out.push(style.fg("error", `  ${w.error}`));
	}
	if (opts.done && windows.length) out.push(style.fg("dim", `Sessions: ${windows.map((w) => w.sessionId).join(", ")}`));
	return out.join("\n");
}

/**
 * The delegate contract's truncating renderer (get_subagent_output, get_subagent_session):
 * the first maxLines lines and "... (N more lines)"; expanded, all of them.
 * The model gets the whole text either way.
 */
export function renderTruncated(text: string, opts: { expanded: boolean; maxLines: number }, style: Style): string {
	const lines = text.split("\n");
	if (opts.expanded || lines.length <= opts.maxLines) return text;
	return [...lines.slice(0, opts.maxLines), style.fg("dim", `... (${lines.length - opts.maxLines} more lines)`)].join("\n");
}
