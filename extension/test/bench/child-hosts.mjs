// The two ways a worker can keep children ready, measured side by side for
// `make bench` (cmd/bench, section "hosts"): per task, from "a task came"
// to "its finalize is in", on the same scripted model.
//
//   rpc: a pre-started `pi --mode rpc --no-session` process with the
//        finalize extension (what the worker's pool keeps): switch_session
//        to the task's file, prompt, wait for agent_settled; one task each.
//   sdk: one long-lived Node process running every task as a session of
//        pi's SDK (docs/sdk.md): a resource loader with the finalize
//        extension, createAgentSession on the task's file, prompt, dispose.
//
// Usage: node child-hosts.mjs N CWD FINALIZE_EXTENSION PROMPT
// Prints one JSON line: {"rpc": [ms...], "sdk": [ms...], "sdkRssMiB": n}.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { createAgentSession, DefaultResourceLoader, getAgentDir, SessionManager } from "@earendil-works/pi-coding-agent";

const [n, cwd, finalize, prompt] = [Number(process.argv[2]), process.argv[3], process.argv[4], process.argv[5]];
const dir = mkdtempSync(join(tmpdir(), "child-hosts-"));

function startRpc() {
	const child = spawn("pi", ["--mode", "rpc", "--no-session", "-e", finalize], { cwd, stdio: ["pipe", "pipe", "inherit"] });
	const waiters = [];
	createInterface({ input: child.stdout }).on("line", (line) => {
		let ev;
		try {
			ev = JSON.parse(line);
		} catch {
			return;
		}
		for (const w of [...waiters]) if (w.match(ev)) waiters.splice(waiters.indexOf(w), 1) && w.resolve(ev);
	});
	const until = (match) => new Promise((resolve) => waiters.push({ match, resolve }));
	const send = (cmd) => child.stdin.write(JSON.stringify(cmd) + "\n");
	const ready = (async () => {
		send({ id: "ready", type: "get_state" });
		await until((ev) => ev.id === "ready");
	})();
	return { child, until, send, ready };
}

async function rpcTask(warm, i) {
	await warm.ready;
	const t0 = performance.now();
	warm.send({ id: "s", type: "switch_session", sessionPath: join(dir, `rpc-${i}.jsonl`) });
	await warm.until((ev) => ev.id === "s");
	warm.send({ id: "p", type: "prompt", message: prompt });
	await warm.until((ev) => ev.type === "agent_settled");
	const ms = performance.now() - t0;
	warm.child.kill("SIGKILL");
	return ms;
}

async function sdkTask(i) {
	const t0 = performance.now();
	const resourceLoader = new DefaultResourceLoader({ cwd, agentDir: getAgentDir(), additionalExtensionPaths: [finalize] });
	await resourceLoader.reload();
	const { session } = await createAgentSession({ cwd, resourceLoader, sessionManager: SessionManager.open(join(dir, `sdk-${i}.jsonl`), dir, cwd) });
	await session.prompt(prompt);
	session.dispose();
	return performance.now() - t0;
}

const out = { rpc: [], sdk: [] };
// The first of each warms up (module loading, the model's connection).
let next = startRpc();
for (let i = 0; i <= n; i++) {
	const warm = next;
	await warm.ready;
	await new Promise((r) => setTimeout(r, 50)); // as the pool's refill: ready before the task comes
	next = i < n ? startRpc() : undefined;
	if (next) await next.ready;
	const r = await rpcTask(warm, i);
	const s = await sdkTask(i);
	if (i > 0) out.rpc.push(r), out.sdk.push(s);
}
out.sdkRssMiB = Math.round(process.memoryUsage().rss / 2 ** 20);
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(out));
process.exit(0);
