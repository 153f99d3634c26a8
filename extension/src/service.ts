// The local service: where it answers (a Unix socket in its data dir), how
// to tell whether Temporal is local, and how to start it when nothing runs.

import { execFile, spawn } from "node:child_process";
import { accessSync, closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The default frontend, as the `subagents` command and `subagents dev` use it. */
export const DEFAULT_ADDRESS = "127.0.0.1:7233";

/** The local service's socket in its data dir (Go: client.SocketName). */
export const SOCKET_NAME = "subagents.sock";

/** The data dir, as the Go side finds it: $SUBAGENTS_DATA_DIR, else ~/.pi/subagents. */
export function dataDir(env: NodeJS.ProcessEnv, setting?: string): string {
	return resolve(setting || env.SUBAGENTS_DATA_DIR || join(homedir(), ".pi", "subagents"));
}

export function socketPath(dir: string): string {
	return join(dir, SOCKET_NAME);
}

/** host and port of a host:port address ("[::1]:7233" too). */
export function splitAddress(address: string): { host: string; port: number } | undefined {
	const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(address.trim());
	if (!m) return undefined;
	return { host: m[1], port: Number(m[2]) };
}

function isLoopback(host: string): boolean {
	return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Whether Temporal is this machine's local service: a loopback address and
 * none of the settings that name a remote or secured cluster (a profile of
 * temporal.toml, an API key, TLS). Only then does the extension use the
 * socket and start the service itself; otherwise it runs `subagents serve`.
 */
export function isLocal(address: string, env: NodeJS.ProcessEnv): boolean {
	const a = splitAddress(address);
	if (!a || !isLoopback(a.host)) return false;
	const remoteHints = ["TEMPORAL_PROFILE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CA_PATH", "TEMPORAL_CONFIG_FILE"];
	return !remoteHints.some((k) => env[k]);
}

/** Same address, with every loopback host counted as one. */
export function sameAddress(a: string, b: string): boolean {
	const x = splitAddress(a);
	const y = splitAddress(b);
	if (!x || !y || x.port !== y.port) return false;
	return x.host === y.host || (isLoopback(x.host) && isLoopback(y.host));
}

// A local connect answers in well under a millisecond; a quarter second
// is a machine too busy to tell, which counts as "nothing answers".
const PROBE_TIMEOUT_MS = 250;

/** Connects to a socket path or TCP address; rejects with the errno code. */
export function dial(target: { path: string } | { host: string; port: number }, timeoutMs = PROBE_TIMEOUT_MS): Promise<Socket> {
	return new Promise((resolve, reject) => {
		const s = connect(target as { path: string });
		const timer = setTimeout(() => {
			s.destroy();
			reject(Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" }));
		}, timeoutMs);
		s.once("connect", () => {
			clearTimeout(timer);
			resolve(s);
		});
		s.once("error", (e) => {
			clearTimeout(timer);
			reject(e);
		});
	});
}

/** Whether a TCP address answers (another Temporal may run there). */
export async function answers(address: string): Promise<boolean> {
	const a = splitAddress(address);
	if (!a) return false;
	try {
		(await dial({ host: a.host, port: a.port })).destroy();
		return true;
	} catch {
		return false;
	}
}

/** The source tree's bin/subagents, beside this extension (`make build` writes it). */
export function sourceTreeBinary(): string {
	return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bin", "subagents");
}

function executable(p: string): boolean {
	try {
		accessSync(p, constants.X_OK);
		return true;
	} catch {
		return false;
	}
}

/** The npm package holding this machine's binaries (`make dist`: one per platform, an optional dependency of this extension's package). */
export function platformPackage(platform: string = process.platform, arch: string = process.arch): string {
	return `@durable-pi/subagents-${platform}-${arch}`;
}

/**
 * The subagents binary of this machine's platform package, as npm installed
 * it beside this extension (`pi install npm:@durable-pi/subagents`);
 * undefined in any other install. from is where the lookup starts (this
 * file).
 */
export function platformBinary(from: string = import.meta.url): string | undefined {
	try {
		const manifest = createRequire(from).resolve(`${platformPackage()}/package.json`);
		const bin = join(dirname(manifest), "bin", "subagents");
		return executable(bin) ? bin : undefined;
	} catch {
		return undefined;
	}
}

/**
 * The subagents executable: the `bin` setting, SUBAGENTS_BIN, the platform
 * package's, PATH, then the source tree's bin/subagents; undefined when none
 * is there.
 */
export function findBinary(setting: string | undefined, env: NodeJS.ProcessEnv, from: string = import.meta.url): string | undefined {
	for (const named of [setting, env.SUBAGENTS_BIN]) {
		if (named) return named.includes("/") ? (executable(named) ? named : undefined) : onPath(named, env);
	}
	return platformBinary(from) ?? onPath("subagents", env) ?? (executable(sourceTreeBinary()) ? sourceTreeBinary() : undefined);
}

/** Where findBinary looks, for the message that says it found nothing. */
export function binarySearched(): string {
	return `settings "bin", SUBAGENTS_BIN, ${platformPackage()}, PATH, ${sourceTreeBinary()}`;
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
	for (const dir of (env.PATH ?? "").split(delimiter)) {
		if (dir && executable(join(dir, name))) return join(dir, name);
	}
	return undefined;
}

/** This extension's prompts/ folder: the sessions contract's profiles, beside the extension. */
export function ownPromptsDir(): string {
	return join(dirname(fileURLToPath(import.meta.url)), "..", "prompts");
}

/** This extension's folder: its src/nested.ts is what a child that delegates loads (the worker's SUBAGENTS_EXTENSION_DIR). */
export function ownExtensionDir(): string {
	return join(dirname(fileURLToPath(import.meta.url)), "..");
}

/**
 * env with this extension's prompts/ added to SUBAGENTS_PROMPT_DIRS, for the
 * service it starts, and this extension as the one that service's children
 * load to delegate (SUBAGENTS_EXTENSION_DIR, unless set).
 */
export function withOwnPrompts(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
	const dirs = (env.SUBAGENTS_PROMPT_DIRS ?? "").split(delimiter).filter(Boolean);
	if (!dirs.includes(ownPromptsDir())) dirs.push(ownPromptsDir());
	return { ...env, SUBAGENTS_PROMPT_DIRS: dirs.join(delimiter), SUBAGENTS_EXTENSION_DIR: env.SUBAGENTS_EXTENSION_DIR || ownExtensionDir() };
}

/**
 * The variables that say who this pi is (its depth, the task session it
 * runs as in a child that delegates, and the worker's token for that
 * session) and its own knobs: the service's CallerPiEnv. Every call
 * carries them; the service never reads its own values, which are those
 * of whichever pi started it.
 */
export const CALLER_ENV = [
	"PI_SUBAGENT_DEPTH",
	"PI_SUBAGENT_CHILD",
	"PI_SUBAGENT_PARENT_SESSION",
	"PI_SUBAGENT_TOKEN",
	"OHM_SUBAGENTS_OUTPUT_MAX_CHARS",
	"OHM_SUBAGENTS_TASK_MAX_EVENTS",
] as const;

/**
 * The service's environment when this pi starts it: withOwnPrompts, without
 * who this pi is (the PI_SUBAGENT_* of CALLER_ENV, and PI_SUBAGENT_NESTED of
 * a child that delegates). The service outlives the pi that started it and serves every
 * pi of the user: a child's session, token or depth left in its
 * environment would reach every child its worker starts later.
 */
export function serviceEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
	const out = withOwnPrompts(env);
	for (const k of [...CALLER_ENV, "PI_SUBAGENT_NESTED"]) if (k.startsWith("PI_SUBAGENT_")) delete out[k];
	return out;
}

/** This extension's release: its package.json's version, the number `subagents version` prints for the binaries of the same release. */
export function ownVersion(dir: string = ownExtensionDir()): string {
	try {
		const v = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
		return typeof v === "string" ? v : "";
	} catch {
		return "";
	}
}

/**
 * Whether release a is newer than release b: dotted numbers compared in
 * turn, a pre-release ("0.2.0-rc.1") below its release; an unknown release
 * (empty, as a service from before releases answers) is older than any.
 */
export function newerRelease(a: string | undefined, b: string | undefined): boolean {
	return compareReleases(a ?? "", b ?? "") > 0;
}

function compareReleases(a: string, b: string): number {
	if (a === b) return 0;
	if (!a || !b) return a ? 1 : -1;
	const [ma, pa = ""] = splitRelease(a);
	const [mb, pb = ""] = splitRelease(b);
	for (let i = 0; i < Math.max(ma.length, mb.length); i++) {
		const d = (ma[i] ?? 0) - (mb[i] ?? 0);
		if (d !== 0) return d;
	}
	if (pa === pb) return 0;
	if (!pa || !pb) return pa ? -1 : 1;
	return pa < pb ? -1 : 1;
}

function splitRelease(v: string): [number[], string?] {
	const dash = v.indexOf("-");
	const main = dash < 0 ? v : v.slice(0, dash);
	return [main.split(".").map((n) => Number.parseInt(n, 10) || 0), dash < 0 ? undefined : v.slice(dash + 1)];
}

/** What a user runs to get the binary. */
export function buildAdvice(): string {
	const tree = resolve(sourceTreeBinary(), "..", "..");
	const inTree = existsSync(join(tree, "go.mod"));
	return inTree
		? `build it with \`make build\` in ${tree} (it writes bin/subagents), or set SUBAGENTS_BIN`
		: "install this extension with `pi install npm:@durable-pi/subagents` (its platform package brings the binaries), or the commands with `go install github.com/durable-pi/subagents/cmd/subagents@latest` and `.../cmd/subagents-dev@latest`, or set SUBAGENTS_BIN";
}

// The first start of the service sets up its database (about two seconds
// here); a loaded machine may take several times that. A minute is far
// beyond a healthy start and still ends a start that hangs.
const START_TIMEOUT_MS = 60_000;
const START_POLL_MS = 50;

/**
 * Starts `subagents dev` for address in dir, detached (its own session, its
 * output in <dir>/service.log), and waits until its socket answers. Two
 * callers at once are fine: the service's lock lets one run, and both wait
 * for the same socket.
 */
export async function startService(opts: { bin: string; address: string; namespace?: string; dir: string; env: NodeJS.ProcessEnv }): Promise<void> {
	const a = splitAddress(opts.address);
	if (!a) throw new Error(`address ${opts.address} is not host:port`);
	const log = join(opts.dir, "service.log");
	mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
	const fd = openSync(log, "a", 0o600);
	// Two services started at once write to the same log: what this start
	// says is read from here on, whatever the other one writes after it.
	const from = fstatSync(fd).size;
	const args = ["dev", "--data-dir", opts.dir, "--ip", a.host === "localhost" ? "127.0.0.1" : a.host, "--port", String(a.port)];
	if (opts.namespace) args.push("--namespace", opts.namespace);
	let exited: number | null | undefined;
	try {
		const child = spawn(opts.bin, args, { cwd: opts.dir, env: serviceEnv(opts.env), detached: true, stdio: ["ignore", fd, fd] });
		child.on("error", () => (exited = -1));
		child.on("exit", (code) => (exited = code));
		// The service outlives this pi: nothing here waits for it.
		child.unref();
	} finally {
		closeSync(fd);
	}
	const deadline = Date.now() + START_TIMEOUT_MS;
	const sock = socketPath(opts.dir);
	while (Date.now() < deadline) {
		try {
			(await dial({ path: sock })).destroy();
			return;
		} catch {
			/* not yet */
		}
		if (exited !== undefined && exited !== 0) {
			// It stopped: fine if another service took the data dir (its
			// socket comes up soon), else the log says why.
			const said = readFrom(log, from);
			if (!/already runs for data dir/.test(said)) throw new Error(`subagents dev exited ${exited}: ${lastLines(said, 5)}`);
		}
		await new Promise((r) => setTimeout(r, START_POLL_MS));
	}
	throw new Error(`subagents dev did not answer on ${sock} within ${START_TIMEOUT_MS / 1000} s; see ${log}`);
}

// `subagents version` answers in tens of milliseconds; five seconds is a
// machine far too loaded to wait for, and then nothing is upgraded.
const VERSION_TIMEOUT_MS = 5_000;

/** The release of the binary bin (`subagents version --json`); "" when it cannot say (a build from before releases). */
export function releaseOf(bin: string): Promise<string> {
	return new Promise((resolve) => {
		execFile(bin, ["version", "--json"], { timeout: VERSION_TIMEOUT_MS }, (err, stdout) => {
			try {
				resolve(err ? "" : String(JSON.parse(stdout).version ?? ""));
			} catch {
				resolve("");
			}
		});
	});
}

// `subagents stop` waits up to 30 s for the service to exit (its worker
// first: a running child gets SIGTERM, then SIGKILL after a 5 s grace);
// ten more for the command itself on a loaded machine.
const STOP_TIMEOUT_MS = 40_000;

/**
 * Stops the local service of dir with bin (`subagents stop`): it stops at a
 * safe point, its worker first; the work it ran goes on at the next start,
 * from its sessions' files. Rejects with what the command said.
 */
export function stopService(bin: string, dir: string, env: NodeJS.ProcessEnv): Promise<void> {
	return new Promise((resolve, reject) => {
		execFile(bin, ["stop", "--data-dir", dir], { timeout: STOP_TIMEOUT_MS, env }, (err, stdout, stderr) => {
			if (err) reject(new Error(`subagents stop: ${(stderr || stdout || err.message).trim()}`));
			else resolve();
		});
	});
}

/** What path holds from byte offset on ("" when it cannot be read). */
function readFrom(path: string, offset: number): string {
	try {
		return readFileSync(path).subarray(offset).toString("utf8");
	} catch {
		return "";
	}
}

function lastLines(text: string, n: number): string {
	return text.trim().split("\n").slice(-n).join("\n");
}
