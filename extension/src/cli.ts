// Runs the `subagents` command: every tool goes through it, so the
// extension and a person at a terminal see the same contract.

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
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

/** What one run of a verb printed on stdout, line by line, and its exit code. */
type LineSink = (line: string) => void;

/**
 * One `subagents serve` process per command and connection, shared by every
 * call of this pi: a tool call then costs a line on a pipe instead of a
 * process start and a dial (about 55 ms and 117 MiB each). It keeps pi alive
 * only while a call is pending, and is started again after it ends.
 */
class ServeProcess {
	private readonly child: ChildProcessWithoutNullStreams;
	private readonly pending = new Map<number, { onLine: LineSink; done: (code: number) => void; fail: (e: Error) => void }>();
	private nextId = 1;
	/** Set once the process ended; answered is whether it ever replied. */
	ended = false;
	answered = false;

	constructor(bin: string, connection: string[], env?: NodeJS.ProcessEnv, cwd?: string) {
		this.child = spawn(bin, ["serve", ...connection], { cwd, env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
		this.child.on("error", (e: NodeJS.ErrnoException) => this.end(notFound(bin, e)));
		this.child.on("exit", (code) => this.end(new SubagentsError("SERVICE_UNAVAILABLE", `subagents serve exited ${code}`)));
		this.child.stdin.on("error", () => {
			/* the process ended: "exit" says so */
		});
		this.child.stderr.resume();
		createInterface({ input: this.child.stdout }).on("line", (line) => this.reply(line));
		this.hold();
	}

	/** Runs one verb; onLine gets its stdout lines as they come. */
	request(args: string[], input: string, onLine: LineSink, signal?: AbortSignal): Promise<number> {
		if (this.ended) return Promise.reject(new SubagentsError("SERVICE_UNAVAILABLE", "subagents serve has ended"));
		const id = this.nextId++;
		return new Promise<number>((resolve, reject) => {
			const onAbort = () => this.write({ id, cancel: true });
			const finish = () => {
				signal?.removeEventListener("abort", onAbort);
				this.pending.delete(id);
				this.hold();
			};
			this.pending.set(id, {
				onLine,
				done: (code) => {
					finish();
					resolve(code);
				},
				fail: (e) => {
					finish();
					reject(e);
				},
			});
			this.hold();
			this.write({ id, args, input });
			if (signal?.aborted) onAbort();
			else signal?.addEventListener("abort", onAbort, { once: true });
		});
	}

	stop(): void {
		this.child.stdin.end();
	}

	private write(msg: unknown): void {
		this.child.stdin.write(JSON.stringify(msg) + "\n");
	}

	private reply(line: string): void {
		let r: { id?: number; line?: string; exit?: number };
		try {
			r = JSON.parse(line);
		} catch {
			return;
		}
		this.answered = true;
		const p = r.id === undefined ? undefined : this.pending.get(r.id);
		if (!p) return;
		if (typeof r.line === "string") p.onLine(r.line);
		if (typeof r.exit === "number") p.done(r.exit);
	}

	private end(e: Error): void {
		if (this.ended) return;
		this.ended = true;
		for (const p of [...this.pending.values()]) p.fail(e);
	}

	/** pi may exit while no call is pending: the process must not hold it. */
	private hold(): void {
		const busy = this.pending.size > 0;
		for (const h of [this.child, this.child.stdin, this.child.stdout, this.child.stderr] as Array<{ ref(): void; unref(): void }>) {
			if (busy) h.ref();
			else h.unref();
		}
	}
}

const servers = new Map<string, ServeProcess>();

/** Whether calls go through `subagents serve` (SUBAGENTS_SERVE=0 turns it off). */
function serveEnabled(env: NodeJS.ProcessEnv): boolean {
	return (env.SUBAGENTS_SERVE ?? "1") !== "0";
}

/** Ends the serve processes (session shutdown). */
export function stopServers(): void {
	for (const s of servers.values()) s.stop();
	servers.clear();
}

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

	/** The shared serve process, or undefined when calls spawn the command. */
	private server(): ServeProcess | undefined {
		const env = this.options.env ?? process.env;
		if (!serveEnabled(env)) return undefined;
		const key = JSON.stringify([this.options.bin, this.options.connection, this.options.cwd ?? ""]);
		let s = servers.get(key);
		if (s?.ended && !s.answered) {
			// It never answered: a subagents without `serve`. Spawn instead.
			return undefined;
		}
		if (!s || s.ended) {
			s = new ServeProcess(this.options.bin, this.options.connection, this.options.env, this.options.cwd);
			servers.set(key, s);
		}
		return s;
	}

	/**
	 * Runs one verb: through the serve process, else as a process of its own
	 * (stopped after CALL_TIMEOUT_MS unless it is a wait). onLine gets its
	 * stdout lines; the promise its exit code and stderr.
	 */
	private async exec(args: string[], input: string, onLine: LineSink, signal?: AbortSignal, bounded = true): Promise<{ code: number | null; err: string }> {
		const server = this.server();
		if (server) {
			try {
				return { code: await server.request(args, input, onLine, signal), err: "" };
			} catch (e) {
				// A serve process that ended without answering anything is
				// an older subagents: fall back; anything else is the answer.
				if (server.answered || !(e instanceof SubagentsError) || e.code !== "SERVICE_UNAVAILABLE") throw e;
			}
		}
		return new Promise((resolve, reject) => {
			const child = this.spawn(args);
			let err = "";
			const timer = bounded ? setTimeout(() => child.kill("SIGTERM"), CALL_TIMEOUT_MS) : undefined;
			const onAbort = () => child.kill("SIGTERM");
			if (signal?.aborted) onAbort();
			signal?.addEventListener("abort", onAbort, { once: true });
			child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
			createInterface({ input: child.stdout }).on("line", onLine);
			child.on("error", (e: NodeJS.ErrnoException) => {
				clearTimeout(timer);
				reject(notFound(this.options.bin, e));
			});
			child.on("close", (code) => {
				clearTimeout(timer);
				signal?.removeEventListener("abort", onAbort);
				resolve({ code, err });
			});
			child.stdin.on("error", () => {
				/* the command exited before reading: its output says why */
			});
			child.stdin.end(input);
		});
	}

	/**
	 * One call: its envelope, or a SubagentsError with the envelope's code.
	 * With input, the request goes to stdin as JSON (--input -).
	 */
	async call<T = Envelope>(verb: string, flags: string[] = [], positional: string[] = [], input?: unknown, signal?: AbortSignal): Promise<T> {
		const args = this.argv(verb, input === undefined ? flags : [...flags, "--input", "-"], positional);
		let out = "";
		const { code, err } = await this.exec(args, input === undefined ? "" : JSON.stringify(input), (line) => (out += line + "\n"), signal);
		let env: Envelope & T;
		try {
			env = JSON.parse(out);
		} catch {
			throw new SubagentsError("SUBAGENT_FAILED", `subagents ${verb} exited ${code}: ${err.trim() || out.trim() || "no output"}`);
		}
		if (env.error) throw new SubagentsError(env.error.code, env.error.message, env.error.category);
		return env;
	}

	/**
	 * Waits for a delegation or session, calling onFrame with each change
	 * (`wait --json --progress`); resolves with the final envelope. An abort
	 * stops the waiting, not the work.
	 */
	async follow(id: string, onFrame: (env: Envelope) => void, signal?: AbortSignal, timeoutMs?: number): Promise<Envelope> {
		const flags = ["--progress", ...(timeoutMs ? ["--timeout-ms", String(timeoutMs)] : [])];
		let last: Envelope | undefined;
		const { code, err } = await this.exec(
			this.argv("wait", flags, [id]),
			"",
			(line) => {
				if (!line.trim()) return;
				try {
					const env = JSON.parse(line) as Envelope;
					if (env.op === "progress") onFrame(env);
					else last = env;
				} catch {
					/* not a line of ours */
				}
			},
			signal,
			false,
		);
		if (last?.error) throw new SubagentsError(last.error.code, last.error.message, last.error.category);
		if (last) return last;
		if (signal?.aborted) throw new SubagentsError("CANCELLED", "waiting was aborted");
		throw new SubagentsError("SUBAGENT_FAILED", `subagents wait exited ${code}: ${err.trim() || "no output"}`);
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
