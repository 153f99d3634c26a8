// Calls the subagents service: every tool goes through the command's verbs
// and envelopes, so the extension and a person at a terminal see the same
// contract. For a local Temporal the calls go to the local service's socket
// (started here when nothing runs); for a remote one, to `subagents serve`.

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { createInterface } from "node:readline";
import type { Envelope } from "./format.ts";
import { answers, binarySearched, buildAdvice, CALLER_ENV, dial, findBinary, newerRelease, ownVersion, releaseOf, sameAddress, socketPath, startService, stopService } from "./service.ts";

/** An error with one of the stable codes of the README's error code table. */
export class SubagentsError extends Error {
	readonly code: string;
	/** The command's category; for the few codes the extension raises itself, theirs. */
	readonly category: string;
	/** The local service is not running (a passive call started nothing). */
	readonly notRunning: boolean;
	constructor(code: string, message: string, category?: string, notRunning = false) {
		super(message);
		this.name = "SubagentsError";
		this.code = code;
		this.notRunning = notRunning;
		this.category = category || (code === "INVALID_INPUT" ? "invalid_input" : code === "SERVICE_UNAVAILABLE" ? "unavailable" : "runtime");
	}
}

export interface CliOptions {
	/** The subagents executable ("subagents": looked up on PATH, then the source tree). */
	bin: string;
	/** Connection flags put after the verb (--address, --namespace, --task-queue). */
	connection: string[];
	env?: NodeJS.ProcessEnv;
	cwd?: string;
	/**
	 * Set when Temporal is this machine's local service: calls go to its
	 * socket, and the service is started when nothing answers.
	 */
	local?: LocalService;
	/** Never start anything (pi's start-up): fail with notRunning instead. */
	passive?: boolean;
	/** Tells the user what is happening (the service starting). */
	onStatus?: (line: string) => void;
}

export interface LocalService {
	address: string;
	/** Whether the address was configured (else the default): a service serving another one is then not ours. */
	addressSet: boolean;
	namespace?: string;
	taskQueue?: string;
	dataDir: string;
	autoStart: boolean;
}

// A call that does not answer within this long is stuck (the command itself
// only talks to a local or remote frontend); waits use follow() instead.
const CALL_TIMEOUT_MS = 120_000;

/** What one run of a verb printed on stdout, line by line, and its exit code. */
type LineSink = (line: string) => void;

/**
 * One connection that speaks the client protocol: a JSON line per request
 * ({id, args, input} or {id, cancel}), replies {id, line} and, last, {id,
 * exit}. It keeps pi alive only while a call is pending.
 */
abstract class Channel {
	private readonly pending = new Map<number, { onLine: LineSink; done: (code: number) => void; fail: (e: Error) => void }>();
	private nextId = 1;
	/** Set once the connection ended; answered is whether it ever replied. */
	ended = false;
	answered = false;

	protected abstract write(line: string): void;
	/** Lets pi exit while nothing is pending, and holds it while something is. */
	protected abstract hold(busy: boolean): void;
	/** Ends the connection; resolves when nothing of it is left (a process exited and was reaped). */
	abstract stop(): Promise<void>;

	/** Runs one verb; onLine gets its stdout lines as they come; caller says who asks (callerOf). */
	request(args: string[], input: string, onLine: LineSink, signal?: AbortSignal, caller?: Record<string, string>): Promise<number> {
		if (this.ended) return Promise.reject(new SubagentsError("SERVICE_UNAVAILABLE", "the connection to the subagents service has ended"));
		const id = this.nextId++;
		return new Promise<number>((resolve, reject) => {
			const onAbort = () => this.send({ id, cancel: true });
			const finish = () => {
				signal?.removeEventListener("abort", onAbort);
				this.pending.delete(id);
				this.hold(this.pending.size > 0);
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
			this.hold(true);
			this.send({ id, args, input, caller });
			if (signal?.aborted) onAbort();
			else signal?.addEventListener("abort", onAbort, { once: true });
		});
	}

	private send(msg: unknown): void {
		this.write(JSON.stringify(msg) + "\n");
	}

	protected reply(line: string): void {
		let r: { id?: number; line?: string; exit?: number; error?: string };
		try {
			r = JSON.parse(line);
		} catch {
			return;
		}
		this.answered = true;
		// ID 0 answers no call: the service says why it ends this connection
		// (at its limit of connections, say), and every call waiting on it
		// fails with that reason rather than "closed the connection".
		if (r.id === 0 && typeof r.exit === "number") {
			this.end(new SubagentsError("SERVICE_UNAVAILABLE", r.error || "the subagents service refused this connection"));
			return;
		}
		const p = r.id === undefined ? undefined : this.pending.get(r.id);
		if (!p) return;
		if (typeof r.line === "string") p.onLine(r.line);
		if (typeof r.exit === "number") p.done(r.exit);
	}

	protected end(e: Error): void {
		if (this.ended) return;
		this.ended = true;
		for (const p of [...this.pending.values()]) p.fail(e);
	}
}

/**
 * `subagents serve`, one per command and connection, shared by every call
 * of this pi: for a remote Temporal, where no local service has a socket.
 */
class ServeProcess extends Channel {
	private readonly child: ChildProcessWithoutNullStreams;

	constructor(bin: string, connection: string[], env?: NodeJS.ProcessEnv, cwd?: string) {
		super();
		this.child = spawn(bin, ["serve", ...connection], { cwd, env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
		this.child.on("error", (e: NodeJS.ErrnoException) => this.end(notFound(bin, e)));
		this.child.on("exit", (code) => this.end(new SubagentsError("SERVICE_UNAVAILABLE", `subagents serve exited ${code}`)));
		this.child.stdin.on("error", () => {
			/* the process ended: "exit" says so */
		});
		this.child.stderr.resume();
		createInterface({ input: this.child.stdout }).on("line", (line) => this.reply(line));
		this.hold(false);
	}

	protected write(line: string): void {
		this.child.stdin.write(line);
	}

	/**
	 * Closes its stdin, which ends it once its calls have answered, and
	 * waits for its exit, so that it never outlives this pi nor trails it as
	 * a zombie; after STOP_GRACE_MS it is killed.
	 */
	stop(): Promise<void> {
		if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
		return new Promise((resolve) => {
			const timer = setTimeout(() => this.child.kill("SIGKILL"), STOP_GRACE_MS);
			this.child.once("exit", () => {
				clearTimeout(timer);
				resolve();
			});
			this.child.stdin.end();
		});
	}

	protected hold(busy: boolean): void {
		for (const h of [this.child, this.child.stdin, this.child.stdout, this.child.stderr] as Array<{ ref(): void; unref(): void }>) {
			if (busy) h.ref();
			else h.unref();
		}
	}
}

/** The local service's socket: no process of this pi's own. */
class SocketChannel extends Channel {
	private readonly socket: Socket;

	constructor(socket: Socket) {
		super();
		this.socket = socket;
		socket.setEncoding("utf8");
		socket.on("error", () => {
			/* "close" follows */
		});
		socket.on("close", () => this.end(new SubagentsError("SERVICE_UNAVAILABLE", "the subagents service closed the connection")));
		createInterface({ input: socket }).on("line", (line) => this.reply(line));
		this.hold(false);
	}

	protected write(line: string): void {
		this.socket.write(line);
	}

	stop(): Promise<void> {
		this.socket.end();
		return Promise.resolve();
	}

	protected hold(busy: boolean): void {
		if (busy) this.socket.ref();
		else this.socket.unref();
	}
}

/** How calls reach the service: a channel, or a process per call. */
type Route = { channel: Channel; connection: string[] } | { spawn: true; connection: string[] };

const channels = new Map<string, Channel>();
/** Connections being opened, by socket: calls at once share one. */
const connecting = new Map<string, Promise<Channel | undefined>>();
const starting = new Map<string, Promise<void>>();
const startedListeners: Array<() => void> = [];

/** Called after this pi started the local service (deferred start-up work). */
export function onServiceStarted(listener: () => void): void {
	startedListeners.push(listener);
}

/** This pi's values of CALLER_ENV (the request's "caller"); a key it does not set is left out. */
export function callerOf(env: NodeJS.ProcessEnv): Record<string, string> {
	const out: Record<string, string> = {};
	for (const k of CALLER_ENV) {
		const v = env[k];
		if (v) out[k] = v;
	}
	return out;
}

/** Whether SUBAGENTS_DISABLED turns delegation off (as the service reads it). */
export function disabled(env: NodeJS.ProcessEnv): boolean {
	return ["1", "true", "yes", "on"].includes((env.SUBAGENTS_DISABLED ?? "").trim().toLowerCase());
}

/** Whether calls go through `subagents serve` (SUBAGENTS_SERVE=0 turns it off). */
function serveEnabled(env: NodeJS.ProcessEnv): boolean {
	return (env.SUBAGENTS_SERVE ?? "1") !== "0";
}

// How long a serve process gets to end after its stdin closes: its calls
// have answered by then (pi shuts down after its tools), and exiting takes
// milliseconds.
const STOP_GRACE_MS = 2_000;

/** Ends this pi's connections and serve processes (session shutdown), and waits for them. */
export async function stopServers(): Promise<void> {
	const all = [...channels.values()];
	channels.clear();
	await Promise.all(all.map((c) => c.stop()));
}

/** The subagents command, as the tools call it. */
export class SubagentsCli {
	readonly options: CliOptions;
	constructor(options: CliOptions) {
		this.options = options;
	}

	private argv(verb: string, flags: string[], positional: string[], connection: string[]): string[] {
		// `profiles` reads files, not Temporal: it takes no connection flags.
		return [verb, "--json", ...(verb === "profiles" ? [] : connection), ...flags, ...(positional.length ? ["--", ...positional] : [])];
	}

	private get env(): NodeJS.ProcessEnv {
		const env = this.options.env ?? process.env;
		// A command this pi runs finds the local service's API key in its
		// data dir, which the settings may name apart from the environment.
		const dir = this.options.local?.dataDir;
		return dir && env.SUBAGENTS_DATA_DIR !== dir ? { ...env, SUBAGENTS_DATA_DIR: dir } : env;
	}

	/** The executable, found; SERVICE_UNAVAILABLE naming how to get it when it is missing. */
	private binary(): string {
		const bin = findBinary(this.options.bin === "subagents" ? undefined : this.options.bin, this.env);
		if (!bin) {
			throw new SubagentsError("SERVICE_UNAVAILABLE", `the subagents command was not found (${binarySearched()}): ${buildAdvice()}`);
		}
		return bin;
	}

	/** Where this call goes: the local socket, a serve process, or a process of its own. */
	private async route(): Promise<Route> {
		if (disabled(this.env)) {
			throw new SubagentsError("SUBAGENTS_DISABLED", "Subagents are disabled by configuration (SUBAGENTS_DISABLED is set for this pi)", "permission");
		}
		const local = this.options.local;
		if (!local) return this.remoteRoute(this.options.connection);
		const sock = socketPath(local.dataDir);
		const queue = local.taskQueue ? ["--task-queue", local.taskQueue] : [];
		const ch = await this.localChannel(local, sock);
		if (ch) return { channel: ch, connection: queue };
		if (await answers(local.address)) {
			// A Temporal of another kind runs there (`temporal server
			// start-dev` with `subagents worker`): talk to it as to a remote.
			return this.remoteRoute(this.options.connection);
		}
		if (this.options.passive) throw new SubagentsError("SERVICE_UNAVAILABLE", `no subagents service runs (${sock})`, "unavailable", true);
		if (!local.autoStart) {
			throw new SubagentsError(
				"SERVICE_UNAVAILABLE",
				`no subagents service answers on ${sock} or ${local.address}: start it with \`subagents dev\` (or \`make run\`), or turn the extension's "autoStart" setting on`,
			);
		}
		await this.start(local, sock);
		const started = await this.localChannel(local, sock);
		if (!started) throw new SubagentsError("SERVICE_UNAVAILABLE", `the subagents service started but does not answer on ${sock}`);
		return { channel: started, connection: queue };
	}

	/**
	 * The open channel to the service on sock, else a new one if it answers
	 * there; calls at once share one connection.
	 */
	private localChannel(local: LocalService, sock: string): Promise<Channel | undefined> {
		const open = channels.get(sock);
		if (open && !open.ended) return Promise.resolve(open);
		let p = connecting.get(sock);
		if (!p) {
			p = this.connectLocal(local, sock).finally(() => connecting.delete(sock));
			connecting.set(sock, p);
		}
		return p;
	}

	private remoteRoute(connection: string[]): Route {
		if (!serveEnabled(this.env)) return { spawn: true, connection };
		const key = JSON.stringify([this.options.bin, connection, this.options.cwd ?? ""]);
		const s = channels.get(key);
		if (s?.ended && !s.answered) {
			// It never answered: a subagents without `serve`. Spawn instead.
			return { spawn: true, connection };
		}
		if (s && !s.ended) return { channel: s, connection };
		const fresh = new ServeProcess(this.binary(), connection, this.env, this.options.cwd);
		channels.set(key, fresh);
		return { channel: fresh, connection };
	}

	/**
	 * A channel to the service on sock, if one answers there and serves our
	 * address. A service of an older release than this extension's binary
	 * is upgraded first (upgrade), once per connect.
	 */
	private async connectLocal(local: LocalService, sock: string, mayUpgrade = true): Promise<Channel | undefined> {
		let socket: Socket;
		try {
			socket = await dial({ path: sock });
		} catch {
			return undefined;
		}
		const ch = new SocketChannel(socket);
		let info: { address?: string; version?: string } = {};
		const code = await ch.request(["service"], "", (line) => {
			try {
				info = JSON.parse(line);
			} catch {
				/* not the answer */
			}
		});
		if (local.addressSet && (code !== 0 || !info.address || !sameAddress(info.address, local.address))) {
			// A service for another address uses this data dir: not ours.
			void ch.stop();
			return undefined;
		}
		if (code === 0 && mayUpgrade && local.autoStart && info.version !== ownVersion() && (await this.upgrade(local, sock, info.version ?? ""))) {
			void ch.stop();
			return this.connectLocal(local, sock, false);
		}
		channels.set(sock, ch);
		return ch;
	}

	/**
	 * Upgrades the local service of release running to this extension's
	 * binary's, if that is newer ([install]: `pi install` of a new release
	 * leaves the old service running): the old one stops at a safe point
	 * (`subagents stop`: its worker first, its children's sessions kept) and
	 * the new one starts; the work goes on under it. A newer service is
	 * left alone: an older pi uses it as it is, and two releases never take
	 * turns stopping each other. Whether it upgraded.
	 */
	private async upgrade(local: LocalService, sock: string, running: string): Promise<boolean> {
		// Calls at once share one connect (connecting), so one upgrade.
		const bin = this.binary();
		const next = await releaseOf(bin);
		if (!newerRelease(next, running)) return false;
		this.options.onStatus?.(`Upgrading the subagents service from ${running || "an earlier release"} to ${next}: it stops at a safe point, and its running work goes on under ${next}…`);
		try {
			await stopService(bin, local.dataDir, this.env);
		} catch (e) {
			throw new SubagentsError("SERVICE_UNAVAILABLE", `could not stop the subagents service ${running || "of an earlier release"} to upgrade it to ${next}: ${(e as Error).message}`);
		}
		await this.start(local, sock);
		return true;
	}

	/** Starts the local service once per socket, however many calls ask at once. */
	private start(local: LocalService, sock: string): Promise<void> {
		let p = starting.get(sock);
		if (!p) {
			const bin = this.binary();
			this.options.onStatus?.(`Starting the subagents service (subagents dev on ${local.address}; log: ${local.dataDir}/service.log)…`);
			p = startService({ bin, address: local.address, namespace: local.namespace, dir: local.dataDir, env: this.env })
				.then(
					// Once per start, however many calls waited for it.
					() => {
						for (const l of startedListeners) l();
					},
					(e: Error) => {
						throw new SubagentsError("SERVICE_UNAVAILABLE", `could not start the subagents service: ${e.message}`);
					},
				)
				.finally(() => starting.delete(sock));
			starting.set(sock, p);
		}
		return p;
	}

	private spawn(args: string[]) {
		return spawn(this.binary(), args, {
			cwd: this.options.cwd,
			env: this.env,
			stdio: ["pipe", "pipe", "pipe"],
		});
	}

	/**
	 * Runs one verb: over a channel, else as a process of its own (stopped
	 * after CALL_TIMEOUT_MS unless it is a wait). onLine gets its stdout
	 * lines; the promise its exit code and stderr.
	 */
	private async exec(
		verb: string,
		flags: string[],
		positional: string[],
		input: string,
		onLine: LineSink,
		signal?: AbortSignal,
		bounded = true,
	): Promise<{ code: number | null; err: string }> {
		let route = await this.route();
		if ("channel" in route) {
			const channel = route.channel;
			try {
				const args = this.argv(verb, flags, positional, route.connection);
				return { code: await channel.request(args, input, onLine, signal, callerOf(this.env)), err: "" };
			} catch (e) {
				// A serve process that ended without answering anything is
				// an older subagents: fall back; anything else is the answer.
				if (channel.answered || channel instanceof SocketChannel || !(e instanceof SubagentsError) || e.code !== "SERVICE_UNAVAILABLE") throw e;
				route = { spawn: true, connection: route.connection };
			}
		}
		const args = this.argv(verb, flags, positional, route.connection);
		return new Promise((resolve, reject) => {
			let child: ChildProcessWithoutNullStreams;
			try {
				child = this.spawn(args);
			} catch (e) {
				reject(e);
				return;
			}
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
		let out = "";
		const { code, err } = await this.exec(
			verb,
			input === undefined ? flags : [...flags, "--input", "-"],
			positional,
			input === undefined ? "" : JSON.stringify(input),
			(line) => (out += line + "\n"),
			signal,
		);
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
			"wait",
			flags,
			[id],
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
