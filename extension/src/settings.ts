// The extension's settings: the "extension" object of subagents.json in
// pi's config dir, overridden by the project's .pi/subagents.json.

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface ToolFamilies {
	/** subagent (seeds 000, 003, 004) */
	subagent: boolean;
	/** task (seed 001) */
	task: boolean;
	/** delegate_to_subagents, get_subagent_output, get_subagent_session, list_subagent_profiles (seed 002) */
	delegate: boolean;
	/** a direct tool per primary profile (seed 001) */
	primary: boolean;
}

export interface Settings {
	/** The subagents executable (else SUBAGENTS_BIN, else PATH). */
	bin: string;
	/** Temporal frontend, namespace and task queue; empty: the command's own defaults and TEMPORAL_* variables. */
	address?: string;
	namespace?: string;
	taskQueue?: string;
	tools: ToolFamilies;
	/** Lines per task in the live progress (seed 002's maxLinesPerWindow). */
	maxLinesPerWindow: number;
}

export function agentDir(env: NodeJS.ProcessEnv = process.env): string {
	return env.PI_CODING_AGENT_DIR || join(homedir(), ".pi", "agent");
}

function readExtensionSettings(path: string): Partial<Settings> & { tools?: Partial<ToolFamilies> } {
	let raw: string;
	try {
		raw = readFileSync(path, "utf8");
	} catch {
		return {};
	}
	try {
		const parsed = JSON.parse(raw);
		return parsed && typeof parsed.extension === "object" && parsed.extension ? parsed.extension : {};
	} catch (e) {
		throw new Error(`${path}: ${(e as Error).message}`);
	}
}

export function loadSettings(cwd: string, env: NodeJS.ProcessEnv = process.env): Settings {
	const global = readExtensionSettings(join(agentDir(env), "subagents.json"));
	const project = readExtensionSettings(join(cwd, ".pi", "subagents.json"));
	const merged = { ...global, ...project, tools: { ...global.tools, ...project.tools } };
	return {
		bin: merged.bin || env.SUBAGENTS_BIN || "subagents",
		address: merged.address,
		namespace: merged.namespace,
		taskQueue: merged.taskQueue,
		tools: {
			subagent: merged.tools.subagent ?? true,
			task: merged.tools.task ?? true,
			delegate: merged.tools.delegate ?? true,
			primary: merged.tools.primary ?? true,
		},
		maxLinesPerWindow: merged.maxLinesPerWindow ?? 10,
	};
}

export function connectionFlags(s: Settings): string[] {
	const flags: string[] = [];
	if (s.address) flags.push("--address", s.address);
	if (s.namespace) flags.push("--namespace", s.namespace);
	if (s.taskQueue) flags.push("--task-queue", s.taskQueue);
	return flags;
}
