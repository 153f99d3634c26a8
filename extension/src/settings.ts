// The extension's settings: the "extension" object of subagents.json in
// pi's config dir, overridden by the project's .pi/subagents.json.

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { type LocalService, SubagentsError } from "./cli.ts";
import { DEFAULT_ADDRESS, dataDir, isLocal } from "./service.ts";

export interface ToolFamilies {
	/** subagent (the sessions and SingleResult contracts) */
	subagent: boolean;
	/** task (the task contract) */
	task: boolean;
	/** delegate_to_subagents, get_subagent_output, get_subagent_session, list_subagent_profiles (the delegate contract) */
	delegate: boolean;
	/** a direct tool per primary profile (the task contract) */
	primary: boolean;
}

export interface Settings {
	/** The subagents executable (else SUBAGENTS_BIN, else PATH, else the source tree's bin/subagents). */
	bin: string;
	/** Temporal frontend, namespace and task queue; empty: the command's own defaults and TEMPORAL_* variables. */
	address?: string;
	/** The local service's data dir (else SUBAGENTS_DATA_DIR, else ~/.pi/subagents): its socket is there. */
	dataDir?: string;
	/** Start the local service when nothing answers (default true; SUBAGENTS_AUTOSTART=0 turns it off). */
	autoStart: boolean;
	namespace?: string;
	taskQueue?: string;
	tools: ToolFamilies;
	/** Lines per task in the live progress (the delegate contract's maxLinesPerWindow). */
	maxLinesPerWindow: number;
	/**
	 * Least time in ms between two progress updates (onUpdate) of one running
	 * tool call: the task contract's OHM_SUBAGENTS_ONUPDATE_THROTTLE_MS,
	 * default 120; an update that repeats the last one is never sent. The
	 * last state of a call is its result, never held back.
	 */
	onUpdateThrottleMs: number;
	/**
	 * How long in ms a finished task waits for a `send` before its session
	 * closes (the start request's idle_ttl_seconds): the task contract's
	 * OHM_SUBAGENTS_TASK_RETENTION_MS; undefined leaves the service's (an
	 * hour). Its result stays readable while Temporal keeps the closed run.
	 */
	taskRetentionMs?: number;
	/**
	 * The lines to show in the session for what the files set and the
	 * extension ignored: a key it does not know (with the near one it
	 * likely is), a value of the wrong kind, a GLOBAL_ONLY key in the
	 * project's file.
	 */
	warnings: string[];
}

/**
 * The keys that decide which program runs and where delegations (and so
 * the prompts they carry) go: read from pi's config dir and the
 * environment only. A cloned repository's .pi/subagents.json that set
 * taskQueue could send every delegation to another user's worker, which
 * would read the prompts and answer with whatever it likes.
 */
export const GLOBAL_ONLY = ["bin", "address", "dataDir", "autoStart", "namespace", "taskQueue"] as const;

/** The keys of the "extension" object, and the tool families "tools" may turn off. */
const EXTENSION_KEYS = [...GLOBAL_ONLY, "tools", "maxLinesPerWindow", "onUpdateThrottleMs", "taskRetentionMs"];
const TOOL_FAMILIES = ["subagent", "task", "delegate", "primary"];

export function agentDir(env: NodeJS.ProcessEnv = process.env): string {
	return env.PI_CODING_AGENT_DIR || join(homedir(), ".pi", "agent");
}

function readExtensionSettings(path: string): Record<string, unknown> {
	let raw: string;
	try {
		raw = readFileSync(path, "utf8");
	} catch {
		return {};
	}
	try {
		const parsed = JSON.parse(raw);
		return parsed && typeof parsed.extension === "object" && parsed.extension && !Array.isArray(parsed.extension) ? parsed.extension : {};
	} catch (e) {
		throw new Error(`${path}: ${(e as Error).message}`);
	}
}

/**
 * The name of known a mistyped one most likely meant, or "" (Go's
 * internal/nearest.Closest, the same rule, so that the extension and the
 * doctor suggest the same key): one the name starts (three letters at
 * least), or one a few edits away (a third of the name's length, at least
 * one); case, "_" and "-" do not count.
 */
export function closest(name: string, known: readonly string[]): string {
	const fold = (s: string) => s.toLowerCase().replace(/[_-]/g, "");
	const lower = name.toLowerCase();
	const folded = fold(name);
	let best = "";
	let bestDist = -1;
	let bestRaw = -1;
	for (const c of known) {
		const fc = fold(c);
		const d = editDistance(folded, fc);
		const limit = Math.max(1, Math.floor([...folded].length / 3));
		if (d > limit && !(folded.length >= 3 && fc.startsWith(folded))) continue;
		const raw = editDistance(lower, c.toLowerCase());
		if (bestDist < 0 || d < bestDist || (d === bestDist && raw < bestRaw)) [best, bestDist, bestRaw] = [c, d, raw];
	}
	return best;
}

/** Insertions, deletions, substitutions and swaps of neighbours from a to b. */
function editDistance(a: string, b: string): number {
	const s = [...a];
	const t = [...b];
	const d = Array.from({ length: s.length + 1 }, (_, i) => Array.from({ length: t.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
	for (let i = 1; i <= s.length; i++) {
		for (let j = 1; j <= t.length; j++) {
			d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (s[i - 1] === t[j - 1] ? 0 : 1));
			if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
		}
	}
	return d[s.length][t.length];
}

/**
 * What the extension ignores in one file's "extension" object, each said
 * in one line and the same words as `subagents doctor` and the service
 * (unknown setting "x" in FILE: did you mean "y"?), and the object with
 * only what it reads: a key it does not know, a tool family it does not
 * know, a value of the wrong kind (its default then holds).
 */
function checked(file: string, ext: Record<string, unknown>): { kept: Partial<Settings> & { tools?: Partial<ToolFamilies> }; warnings: string[] } {
	const warnings: string[] = [];
	const unknown = (path: string, key: string, known: readonly string[]) => {
		const near = closest(key, known);
		warnings.push(
			near
				? `subagents: unknown setting "${path}${key}" in ${file}: did you mean "${path}${near}"? The extension ignores it`
				: `subagents: unknown setting "${path}${key}" in ${file}: the extension ignores it (docs/settings.md lists its keys)`,
		);
	};
	const wrong = (key: string, mustBe: string, v: unknown) => warnings.push(`subagents: ${file}: extension.${key} must be ${mustBe}, not ${JSON.stringify(v)}: ignored`);
	const kept: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(ext)) {
		if (!EXTENSION_KEYS.includes(k)) {
			unknown("extension.", k, EXTENSION_KEYS);
			continue;
		}
		switch (k) {
			case "bin":
			case "address":
			case "dataDir":
			case "namespace":
			case "taskQueue":
				if (typeof v !== "string" || v.trim() === "") {
					wrong(k, "a non-empty string", v);
					continue;
				}
				break;
			case "autoStart":
				if (typeof v !== "boolean") {
					wrong(k, "true or false", v);
					continue;
				}
				break;
			case "tools": {
				if (!v || typeof v !== "object" || Array.isArray(v)) {
					wrong(k, `an object of ${TOOL_FAMILIES.join(", ")}, each true or false`, v);
					continue;
				}
				const tools: Record<string, boolean> = {};
				for (const [name, on] of Object.entries(v as Record<string, unknown>)) {
					if (!TOOL_FAMILIES.includes(name)) unknown("extension.tools.", name, TOOL_FAMILIES);
					else if (typeof on !== "boolean") wrong(`tools.${name}`, "true or false", on);
					else tools[name] = on;
				}
				kept.tools = tools;
				continue;
			}
		}
		kept[k] = v;
	}
	return { kept, warnings };
}

/**
 * The settings: the global file, then the project's. What decides which
 * program runs and where delegations go (GLOBAL_ONLY) comes from the global
 * file and the environment only: a repository's own .pi/subagents.json
 * must not make opening pi in it run its binary or send work elsewhere. A
 * project file that sets one is ignored for it, with a warning.
 */
export function loadSettings(cwd: string, env: NodeJS.ProcessEnv = process.env): Settings {
	const globalFile = join(agentDir(env), "subagents.json");
	const projectFile = join(cwd, ".pi", "subagents.json");
	const g = checked(globalFile, readExtensionSettings(globalFile));
	const p = checked(projectFile, readExtensionSettings(projectFile));
	const global = g.kept;
	const project = p.kept;
	const ignored: string[] = GLOBAL_ONLY.filter((k) => project[k] !== undefined);
	const projectSafe = { ...project };
	for (const k of GLOBAL_ONLY) delete projectSafe[k];
	// A project may turn a tool family off, never back on: a repository
	// must not add tools to the user's pi that the user turned off.
	const projectTools: Partial<ToolFamilies> = {};
	for (const [k, v] of Object.entries(project.tools ?? {}) as Array<[keyof ToolFamilies, boolean]>) {
		if (v === false) projectTools[k] = false;
		else if (global.tools?.[k] === false) ignored.push(`tools.${k}`);
	}
	const merged = { ...global, ...projectSafe, tools: { ...global.tools, ...projectTools } };
	const warnings = [...g.warnings, ...p.warnings];
	if (ignored.length) warnings.push(`subagents: ${projectFile} sets ${ignored.join(", ")}, which only ${globalFile} or the environment may set: ignored`);
	return {
		bin: global.bin || env.SUBAGENTS_BIN || "subagents",
		address: global.address,
		dataDir: global.dataDir,
		autoStart: env.SUBAGENTS_AUTOSTART !== undefined ? env.SUBAGENTS_AUTOSTART !== "0" : (global.autoStart ?? true),
		namespace: global.namespace,
		taskQueue: global.taskQueue,
		tools: {
			subagent: merged.tools.subagent ?? true,
			task: merged.tools.task ?? true,
			delegate: merged.tools.delegate ?? true,
			primary: merged.tools.primary ?? true,
		},
		maxLinesPerWindow: linesPerWindow(env.SUBAGENTS_MAX_LINES_PER_WINDOW ?? merged.maxLinesPerWindow),
		onUpdateThrottleMs:
			wholeMs("onUpdateThrottleMs", knob(env, "ONUPDATE_THROTTLE_MS") ?? merged.onUpdateThrottleMs, 0, MAX_THROTTLE_MS) ?? DEFAULT_THROTTLE_MS,
		taskRetentionMs: wholeMs("taskRetentionMs", knob(env, "TASK_RETENTION_MS") ?? merged.taskRetentionMs, 1, MAX_RETENTION_MS),
		warnings,
	};
}

/** The task contract's onUpdate throttle default, in ms. */
export const DEFAULT_THROTTLE_MS = 120;
/** A minute: a slower update no longer shows a task's progress. */
const MAX_THROTTLE_MS = 60_000;
/** Thirty days: a session idle longer is better resumed than kept open. */
const MAX_RETENTION_MS = 30 * 24 * 3600 * 1000;

/**
 * A knob's variable: SUBAGENTS_<name>, else the task contract's own
 * OHM_SUBAGENTS_<name>, which a user migrating from it already sets.
 */
function knob(env: NodeJS.ProcessEnv, name: string): string | undefined {
	const v = env[`SUBAGENTS_${name}`] || env[`OHM_SUBAGENTS_${name}`];
	return v === undefined || v === "" ? undefined : v;
}

/**
 * A whole number of ms from lo, or undefined when unset; one above hi is hi
 * (the task contract sets no upper bound, so a value its users kept is not
 * refused for being long).
 */
function wholeMs(key: string, v: unknown, lo: number, hi: number): number | undefined {
	if (v === undefined || v === "") return undefined;
	const n = typeof v === "string" ? Number(v) : v;
	if (typeof n === "number" && Number.isInteger(n) && n > hi) return hi;
	if (typeof n !== "number" || !Number.isInteger(n) || n < lo) {
		const name = key === "taskRetentionMs" ? "TASK_RETENTION_MS" : "ONUPDATE_THROTTLE_MS";
		throw new SubagentsError(
			"INVALID_INPUT",
			`${key} must be a whole number of milliseconds, ${lo} to ${hi}, not ${JSON.stringify(v)} (subagents.json "extension", SUBAGENTS_${name} or OHM_SUBAGENTS_${name})`,
		);
	}
	return n;
}

/**
 * The start request's idle_ttl_seconds for taskRetentionMs (whole seconds,
 * at least one), or undefined to leave the service's.
 */
export function idleTtlSeconds(s: Settings): number | undefined {
	return s.taskRetentionMs === undefined ? undefined : Math.max(1, Math.ceil(s.taskRetentionMs / 1000));
}

/** The delegate contract's maxLinesPerWindow: 10 unless set, a whole number 1 to 1000. */
function linesPerWindow(v: unknown): number {
	if (v === undefined || v === "") return 10;
	const n = typeof v === "string" ? Number(v) : v;
	if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 1000) {
		throw new SubagentsError("INVALID_INPUT", `maxLinesPerWindow must be a whole number 1 to 1000, not ${JSON.stringify(v)} (subagents.json "extension", or SUBAGENTS_MAX_LINES_PER_WINDOW)`);
	}
	return n;
}

/** The local service to use, or undefined when Temporal is remote. */
export function localService(s: Settings, env: NodeJS.ProcessEnv = process.env): LocalService | undefined {
	const address = s.address || env.TEMPORAL_ADDRESS || DEFAULT_ADDRESS;
	if (!isLocal(address, env)) return undefined;
	return {
		address,
		addressSet: Boolean(s.address || env.TEMPORAL_ADDRESS),
		namespace: s.namespace || env.TEMPORAL_NAMESPACE || undefined,
		taskQueue: s.taskQueue || env.SUBAGENTS_TASK_QUEUE || undefined,
		dataDir: dataDir(env, s.dataDir),
		autoStart: s.autoStart,
	};
}

export function connectionFlags(s: Settings): string[] {
	const flags: string[] = [];
	if (s.address) flags.push("--address", s.address);
	if (s.namespace) flags.push("--namespace", s.namespace);
	if (s.taskQueue) flags.push("--task-queue", s.taskQueue);
	return flags;
}
