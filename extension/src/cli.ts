// Runs the `subagents` command: every tool goes through it, so the
// extension and a person at a terminal see the same contract.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Envelope } from "./format.ts";

/** An error with one of DESIGN.md's stable codes. */
export class SubagentsError extends Error {
	readonly code: string;
	/** The command's category; for the few codes the extension raises itself, theirs. */
	readonly category: string;
	constructor(code: string, message: string, category?: string) {
		super(message);
		this.name = "SubagentsError";
		this.code = code;
		this.category = category || (code === "INVALID_INPUT" ? "invalid_input" : code === "SERVICE_UNAVAILABLE" ? "unavailable" : "runtime");
	}
}

export interface CliOptions {
	/** The subagents executable. */
	bin: string;
	/** Connection flags put after the verb (--address, --namespace, --task-queue). */
	connection: string[];
	env?: NodeJS.ProcessEnv;
	cwd?: string;
}

// A call that does not answer within this long is stuck (the command itself
// only talks to a local or remote frontend); waits use follow() instead.
const CALL_TIMEOUT_MS = 120_000;

/** The subagents command, as the tools call it. */
export class SubagentsCli {
	readonly options: CliOptions;
	constructor(options: CliOptions) {
		this.options = options;
	}

	private argv(verb: string, flags: string[], positional: string[]): string[] {
		// `profiles` reads files, not Temporal: it takes no connection flags.
		const connection = verb === "profiles" ? [] : this.options.connection;
		return [verb, "--json", ...connection, ...flags, ...(positional.length ? ["--", ...positional] : [])];
	}

	private spawn(args: string[]) {
		return spawn(this.options.bin, args, {
			cwd: this.options.cwd,
			env: this.options.env ?? process.env,
			stdio: ["pipe", "pipe", "pipe"],
		});
	}

	/**
	 * One call: its envelope, or a SubagentsError with the envelope's code.
	 * With input, the request goes to stdin as JSON (--input -).
	 */
	call<T = Envelope>(verb: string, flags: string[] = [], positional: string[] = [], input?: unknown, signal?: AbortSignal): Promise<T> {
		const args = this.argv(verb, input === undefined ? flags : [...flags, "--input", "-"], positional);
		return new Promise((resolve, reject) => {
			const child = this.spawn(args);
			let out = "";
			let err = "";
			const timer = setTimeout(() => child.kill("SIGTERM"), CALL_TIMEOUT_MS);
			const onAbort = () => child.kill("SIGTERM");
			signal?.addEventListener("abort", onAbort, { once: true });
			child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
			child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
			child.on("error", (e: NodeJS.ErrnoException) => {
				clearTimeout(timer);
				reject(notFound(this.options.bin, e));
			});
			child.on("close", (code) => {
				clearTimeout(timer);
				signal?.removeEventListener("abort", onAbort);
				let env: Envelope & T;
				try {
					env = JSON.parse(out);
				} catch {
					reject(new SubagentsError("SUBAGENT_FAILED", `subagents ${verb} exited ${code}: ${err.trim() || out.trim() || "no output"}`));
					return;
				}
				if (env.error) reject(new SubagentsError(env.error.code, env.error.message, env.error.category));
				else resolve(env);
			});
			child.stdin.on("error", () => {
				/* the command exited before reading: its output says why */
			});
			child.stdin.end(input === undefined ? "" : JSON.stringify(input));
		});
	}

	/**
	 * Waits for a delegation or session, calling onFrame with each change
	 * (`wait --json --progress`); resolves with the final envelope. An abort
	 * stops the waiting, not the work.
	 */
	follow(id: string, onFrame: (env: Envelope) => void, signal?: AbortSignal, timeoutMs?: number): Promise<Envelope> {
		const flags = ["--progress", ...(timeoutMs ? ["--timeout-ms", String(timeoutMs)] : [])];
		return new Promise((resolve, reject) => {
			const child = this.spawn(this.argv("wait", flags, [id]));
			child.stdin.end();
			let last: Envelope | undefined;
			let err = "";
			const onAbort = () => child.kill("SIGTERM");
			if (signal?.aborted) onAbort();
			signal?.addEventListener("abort", onAbort, { once: true });
			child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
			const lines = createInterface({ input: child.stdout });
			lines.on("line", (line) => {
				if (!line.trim()) return;
				try {
					const env = JSON.parse(line) as Envelope;
					if (env.op === "progress") onFrame(env);
					else last = env;
				} catch {
					/* not a line of ours */
				}
			});
			child.on("error", (e: NodeJS.ErrnoException) => reject(notFound(this.options.bin, e)));
			child.on("close", (code) => {
				signal?.removeEventListener("abort", onAbort);
				if (last?.error) reject(new SubagentsError(last.error.code, last.error.message, last.error.category));
				else if (last) resolve(last);
				else if (signal?.aborted) reject(new SubagentsError("CANCELLED", "waiting was aborted"));
				else reject(new SubagentsError("SUBAGENT_FAILED", `subagents wait exited ${code}: ${err.trim() || "no output"}`));
			});
		});
	}
}

function notFound(bin: string, e: NodeJS.ErrnoException): SubagentsError {
	if (e.code === "ENOENT") {
		return new SubagentsError(
			"SERVICE_UNAVAILABLE",
			`the subagents command was not found (${bin}): set SUBAGENTS_BIN or the extension's "bin" setting, or put it on PATH (\`make build\` writes bin/subagents)`,
		);
	}
	return new SubagentsError("SERVICE_UNAVAILABLE", `could not run ${bin}: ${e.message}`);
}
