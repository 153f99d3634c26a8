// Generated from src/*.ts by make build (node --run build): do not edit.

// src/extension.ts
import { setFlagsFromString } from "node:v8";

// src/cli.ts
import { spawn as spawn2 } from "node:child_process";
import { createInterface } from "node:readline";

// src/service.ts
import { execFile, spawn } from "node:child_process";
import { accessSync, closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
var DEFAULT_ADDRESS = "127.0.0.1:7233";
var SOCKET_NAME = "subagents.sock";
function dataDir(env, setting) {
  return resolve(setting || env.SUBAGENTS_DATA_DIR || join(homedir(), ".pi", "subagents"));
}
function socketPath(dir) {
  return join(dir, SOCKET_NAME);
}
function splitAddress(address) {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(address.trim());
  if (!m) return void 0;
  return { host: m[1], port: Number(m[2]) };
}
function isLoopback(host) {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
function isLocal(address, env) {
  const a = splitAddress(address);
  if (!a || !isLoopback(a.host)) return false;
  const remoteHints = ["TEMPORAL_PROFILE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CA_PATH", "TEMPORAL_CONFIG_FILE"];
  return !remoteHints.some((k) => env[k]);
}
function sameAddress(a, b) {
  const x = splitAddress(a);
  const y = splitAddress(b);
  if (!x || !y || x.port !== y.port) return false;
  return x.host === y.host || isLoopback(x.host) && isLoopback(y.host);
}
var PROBE_TIMEOUT_MS = 250;
function dial(target, timeoutMs = PROBE_TIMEOUT_MS) {
  return new Promise((resolve2, reject) => {
    const s = connect(target);
    const timer = setTimeout(() => {
      s.destroy();
      reject(Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" }));
    }, timeoutMs);
    s.once("connect", () => {
      clearTimeout(timer);
      resolve2(s);
    });
    s.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}
async function answers(address) {
  const a = splitAddress(address);
  if (!a) return false;
  try {
    (await dial({ host: a.host, port: a.port })).destroy();
    return true;
  } catch {
    return false;
  }
}
function sourceTreeBinary() {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "..", "bin", "subagents");
}
function executable(p) {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
function platformPackage(platform = process.platform, arch = process.arch) {
  return `@durable-pi/subagents-${platform}-${arch}`;
}
function platformBinary(from = import.meta.url) {
  try {
    const manifest = createRequire(from).resolve(`${platformPackage()}/package.json`);
    const bin = join(dirname(manifest), "bin", "subagents");
    return executable(bin) ? bin : void 0;
  } catch {
    return void 0;
  }
}
function findBinary(setting, env, from = import.meta.url) {
  for (const named of [setting, env.SUBAGENTS_BIN]) {
    if (named) return named.includes("/") ? executable(named) ? named : void 0 : onPath(named, env);
  }
  return platformBinary(from) ?? onPath("subagents", env) ?? (executable(sourceTreeBinary()) ? sourceTreeBinary() : void 0);
}
function binarySearched() {
  return `settings "bin", SUBAGENTS_BIN, ${platformPackage()}, PATH, ${sourceTreeBinary()}`;
}
function onPath(name, env) {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return void 0;
}
function ownPromptsDir() {
  return join(dirname(fileURLToPath(import.meta.url)), "..", "prompts");
}
function ownExtensionDir() {
  return join(dirname(fileURLToPath(import.meta.url)), "..");
}
function withOwnPrompts(env) {
  const dirs = (env.SUBAGENTS_PROMPT_DIRS ?? "").split(delimiter).filter(Boolean);
  if (!dirs.includes(ownPromptsDir())) dirs.push(ownPromptsDir());
  return { ...env, SUBAGENTS_PROMPT_DIRS: dirs.join(delimiter), SUBAGENTS_EXTENSION_DIR: env.SUBAGENTS_EXTENSION_DIR || ownExtensionDir() };
}
var CALLER_ENV = [
  "PI_SUBAGENT_DEPTH",
  "PI_SUBAGENT_CHILD",
  "PI_SUBAGENT_PARENT_SESSION",
  "PI_SUBAGENT_TOKEN",
  "OHM_SUBAGENTS_OUTPUT_MAX_CHARS",
  "OHM_SUBAGENTS_TASK_MAX_EVENTS"
];
function serviceEnv(env) {
  const out = withOwnPrompts(env);
  for (const k of [...CALLER_ENV, "PI_SUBAGENT_NESTED"]) if (k.startsWith("PI_SUBAGENT_")) delete out[k];
  return out;
}
function ownVersion(dir = ownExtensionDir()) {
  try {
    const v = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
    return typeof v === "string" ? v : "";
  } catch {
    return "";
  }
}
function newerRelease(a, b) {
  return compareReleases(a ?? "", b ?? "") > 0;
}
function compareReleases(a, b) {
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
function splitRelease(v) {
  const dash = v.indexOf("-");
  const main = dash < 0 ? v : v.slice(0, dash);
  return [main.split(".").map((n) => Number.parseInt(n, 10) || 0), dash < 0 ? void 0 : v.slice(dash + 1)];
}
function buildAdvice() {
  const tree = resolve(sourceTreeBinary(), "..", "..");
  const inTree = existsSync(join(tree, "go.mod"));
  return inTree ? `build it with \`make build\` in ${tree} (it writes bin/subagents), or set SUBAGENTS_BIN` : "install this extension with `pi install npm:@durable-pi/subagents` (its platform package brings the binaries), or the commands with `go install github.com/durable-pi/subagents/cmd/subagents@latest` and `.../cmd/subagents-dev@latest`, or set SUBAGENTS_BIN";
}
var START_TIMEOUT_MS = 6e4;
var START_POLL_MS = 50;
async function startService(opts) {
  const a = splitAddress(opts.address);
  if (!a) throw new Error(`address ${opts.address} is not host:port`);
  const log = join(opts.dir, "service.log");
  mkdirSync(opts.dir, { recursive: true, mode: 448 });
  const fd = openSync(log, "a", 384);
  const from = fstatSync(fd).size;
  const args = ["dev", "--data-dir", opts.dir, "--ip", a.host === "localhost" ? "127.0.0.1" : a.host, "--port", String(a.port)];
  if (opts.namespace) args.push("--namespace", opts.namespace);
  let exited;
  try {
    const child = spawn(opts.bin, args, { cwd: opts.dir, env: serviceEnv(opts.env), detached: true, stdio: ["ignore", fd, fd] });
    child.on("error", () => exited = -1);
    child.on("exit", (code) => exited = code);
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
    }
    if (exited !== void 0 && exited !== 0) {
      const said = readFrom(log, from);
      if (!/already runs for data dir/.test(said)) throw new Error(`subagents dev exited ${exited}: ${lastLines(said, 5)}`);
    }
    await new Promise((r) => setTimeout(r, START_POLL_MS));
  }
  throw new Error(`subagents dev did not answer on ${sock} within ${START_TIMEOUT_MS / 1e3} s; see ${log}`);
}
var VERSION_TIMEOUT_MS = 5e3;
function releaseOf(bin) {
  return new Promise((resolve2) => {
    execFile(bin, ["version", "--json"], { timeout: VERSION_TIMEOUT_MS }, (err, stdout) => {
      try {
        resolve2(err ? "" : String(JSON.parse(stdout).version ?? ""));
      } catch {
        resolve2("");
      }
    });
  });
}
var STOP_TIMEOUT_MS = 4e4;
function stopService(bin, dir, env) {
  return new Promise((resolve2, reject) => {
    execFile(bin, ["stop", "--data-dir", dir], { timeout: STOP_TIMEOUT_MS, env }, (err, stdout, stderr) => {
      if (err) reject(new Error(`subagents stop: ${(stderr || stdout || err.message).trim()}`));
      else resolve2();
    });
  });
}
function readFrom(path, offset) {
  try {
    return readFileSync(path).subarray(offset).toString("utf8");
  } catch {
    return "";
  }
}
function lastLines(text2, n) {
  return text2.trim().split("\n").slice(-n).join("\n");
}

// src/cli.ts
var SubagentsError = class extends Error {
  code;
  /** The command's category; for the few codes the extension raises itself, theirs. */
  category;
  /** The local service is not running (a passive call started nothing). */
  notRunning;
  constructor(code, message, category, notRunning = false) {
    super(message);
    this.name = "SubagentsError";
    this.code = code;
    this.notRunning = notRunning;
    this.category = category || (code === "INVALID_INPUT" ? "invalid_input" : code === "SERVICE_UNAVAILABLE" ? "unavailable" : "runtime");
  }
};
var CALL_TIMEOUT_MS = 12e4;
var Channel = class {
  pending = /* @__PURE__ */ new Map();
  nextId = 1;
  /** Set once the connection ended; answered is whether it ever replied. */
  ended = false;
  answered = false;
  /** Runs one verb; onLine gets its stdout lines as they come; caller says who asks (callerOf). */
  request(args, input, onLine, signal, caller) {
    if (this.ended) return Promise.reject(new SubagentsError("SERVICE_UNAVAILABLE", "the connection to the subagents service has ended"));
    const id = this.nextId++;
    return new Promise((resolve2, reject) => {
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
          resolve2(code);
        },
        fail: (e) => {
          finish();
          reject(e);
        }
      });
      this.hold(true);
      this.send({ id, args, input, caller });
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
  send(msg) {
    this.write(JSON.stringify(msg) + "\n");
  }
  reply(line) {
    let r;
    try {
      r = JSON.parse(line);
    } catch {
      return;
    }
    this.answered = true;
    if (r.id === 0 && typeof r.exit === "number") {
      this.end(new SubagentsError("SERVICE_UNAVAILABLE", r.error || "the subagents service refused this connection"));
      return;
    }
    const p = r.id === void 0 ? void 0 : this.pending.get(r.id);
    if (!p) return;
    if (typeof r.line === "string") p.onLine(r.line);
    if (typeof r.exit === "number") p.done(r.exit);
  }
  end(e) {
    if (this.ended) return;
    this.ended = true;
    for (const p of [...this.pending.values()]) p.fail(e);
  }
};
var ServeProcess = class extends Channel {
  child;
  constructor(bin, connection, env, cwd) {
    super();
    this.child = spawn2(bin, ["serve", ...connection], { cwd, env: env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    this.child.on("error", (e) => this.end(notFound(bin, e)));
    this.child.on("exit", (code) => this.end(new SubagentsError("SERVICE_UNAVAILABLE", `subagents serve exited ${code}`)));
    this.child.stdin.on("error", () => {
    });
    this.child.stderr.resume();
    createInterface({ input: this.child.stdout }).on("line", (line) => this.reply(line));
    this.hold(false);
  }
  write(line) {
    this.child.stdin.write(line);
  }
  /**
   * Closes its stdin, which ends it once its calls have answered, and
   * waits for its exit, so that it never outlives this pi nor trails it as
   * a zombie; after STOP_GRACE_MS it is killed.
   */
  stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve2) => {
      const timer = setTimeout(() => this.child.kill("SIGKILL"), STOP_GRACE_MS);
      this.child.once("exit", () => {
        clearTimeout(timer);
        resolve2();
      });
      this.child.stdin.end();
    });
  }
  hold(busy) {
    for (const h of [this.child, this.child.stdin, this.child.stdout, this.child.stderr]) {
      if (busy) h.ref();
      else h.unref();
    }
  }
};
var SocketChannel = class extends Channel {
  socket;
  constructor(socket) {
    super();
    this.socket = socket;
    socket.setEncoding("utf8");
    socket.on("error", () => {
    });
    socket.on("close", () => this.end(new SubagentsError("SERVICE_UNAVAILABLE", "the subagents service closed the connection")));
    createInterface({ input: socket }).on("line", (line) => this.reply(line));
    this.hold(false);
  }
  write(line) {
    this.socket.write(line);
  }
  stop() {
    this.socket.end();
    return Promise.resolve();
  }
  hold(busy) {
    if (busy) this.socket.ref();
    else this.socket.unref();
  }
};
var channels = /* @__PURE__ */ new Map();
var connecting = /* @__PURE__ */ new Map();
var starting = /* @__PURE__ */ new Map();
var startedListeners = [];
function onServiceStarted(listener) {
  startedListeners.push(listener);
}
function callerOf(env) {
  const out = {};
  for (const k of CALLER_ENV) {
    const v = env[k];
    if (v) out[k] = v;
  }
  return out;
}
function disabled(env) {
  return ["1", "true", "yes", "on"].includes((env.SUBAGENTS_DISABLED ?? "").trim().toLowerCase());
}
function serveEnabled(env) {
  return (env.SUBAGENTS_SERVE ?? "1") !== "0";
}
var STOP_GRACE_MS = 2e3;
async function stopServers() {
  const all = [...channels.values()];
  channels.clear();
  await Promise.all(all.map((c) => c.stop()));
}
var SubagentsCli = class {
  options;
  constructor(options) {
    this.options = options;
  }
  argv(verb, flags, positional, connection) {
    return [verb, "--json", ...verb === "profiles" ? [] : connection, ...flags, ...positional.length ? ["--", ...positional] : []];
  }
  get env() {
    const env = this.options.env ?? process.env;
    const dir = this.options.local?.dataDir;
    return dir && env.SUBAGENTS_DATA_DIR !== dir ? { ...env, SUBAGENTS_DATA_DIR: dir } : env;
  }
  /** The executable, found; SERVICE_UNAVAILABLE naming how to get it when it is missing. */
  binary() {
    const bin = findBinary(this.options.bin === "subagents" ? void 0 : this.options.bin, this.env);
    if (!bin) {
      throw new SubagentsError("SERVICE_UNAVAILABLE", `the subagents command was not found (${binarySearched()}): ${buildAdvice()}`);
    }
    return bin;
  }
  /** Where this call goes: the local socket, a serve process, or a process of its own. */
  async route() {
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
      return this.remoteRoute(this.options.connection);
    }
    if (this.options.passive) throw new SubagentsError("SERVICE_UNAVAILABLE", `no subagents service runs (${sock})`, "unavailable", true);
    if (!local.autoStart) {
      throw new SubagentsError(
        "SERVICE_UNAVAILABLE",
        `no subagents service answers on ${sock} or ${local.address}: start it with \`subagents dev\` (or \`make run\`), or turn the extension's "autoStart" setting on`
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
  localChannel(local, sock) {
    const open = channels.get(sock);
    if (open && !open.ended) return Promise.resolve(open);
    let p = connecting.get(sock);
    if (!p) {
      p = this.connectLocal(local, sock).finally(() => connecting.delete(sock));
      connecting.set(sock, p);
    }
    return p;
  }
  remoteRoute(connection) {
    if (!serveEnabled(this.env)) return { spawn: true, connection };
    const key = JSON.stringify([this.options.bin, connection, this.options.cwd ?? ""]);
    const s = channels.get(key);
    if (s?.ended && !s.answered) {
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
  async connectLocal(local, sock, mayUpgrade = true) {
    let socket;
    try {
      socket = await dial({ path: sock });
    } catch {
      return void 0;
    }
    const ch = new SocketChannel(socket);
    let info = {};
    const code = await ch.request(["service"], "", (line) => {
      try {
        info = JSON.parse(line);
      } catch {
      }
    });
    if (local.addressSet && (code !== 0 || !info.address || !sameAddress(info.address, local.address))) {
      void ch.stop();
      return void 0;
    }
    if (code === 0 && mayUpgrade && local.autoStart && info.version !== ownVersion() && await this.upgrade(local, sock, info.version ?? "")) {
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
  async upgrade(local, sock, running) {
    const bin = this.binary();
    const next = await releaseOf(bin);
    if (!newerRelease(next, running)) return false;
    this.options.onStatus?.(`Upgrading the subagents service from ${running || "an earlier release"} to ${next}: it stops at a safe point, and its running work goes on under ${next}\u2026`);
    try {
      await stopService(bin, local.dataDir, this.env);
    } catch (e) {
      throw new SubagentsError("SERVICE_UNAVAILABLE", `could not stop the subagents service ${running || "of an earlier release"} to upgrade it to ${next}: ${e.message}`);
    }
    await this.start(local, sock);
    return true;
  }
  /** Starts the local service once per socket, however many calls ask at once. */
  start(local, sock) {
    let p = starting.get(sock);
    if (!p) {
      const bin = this.binary();
      this.options.onStatus?.(`Starting the subagents service (subagents dev on ${local.address}; log: ${local.dataDir}/service.log)\u2026`);
      p = startService({ bin, address: local.address, namespace: local.namespace, dir: local.dataDir, env: this.env }).then(
        // Once per start, however many calls waited for it.
        () => {
          for (const l of startedListeners) l();
        },
        (e) => {
          throw new SubagentsError("SERVICE_UNAVAILABLE", `could not start the subagents service: ${e.message}`);
        }
      ).finally(() => starting.delete(sock));
      starting.set(sock, p);
    }
    return p;
  }
  spawn(args) {
    return spawn2(this.binary(), args, {
      cwd: this.options.cwd,
      env: this.env,
      stdio: ["pipe", "pipe", "pipe"]
    });
  }
  /**
   * Runs one verb: over a channel, else as a process of its own (stopped
   * after CALL_TIMEOUT_MS unless it is a wait). onLine gets its stdout
   * lines; the promise its exit code and stderr.
   */
  async exec(verb, flags, positional, input, onLine, signal, bounded = true) {
    let route = await this.route();
    if ("channel" in route) {
      const channel = route.channel;
      try {
        const args2 = this.argv(verb, flags, positional, route.connection);
        return { code: await channel.request(args2, input, onLine, signal, callerOf(this.env)), err: "" };
      } catch (e) {
        if (channel.answered || channel instanceof SocketChannel || !(e instanceof SubagentsError) || e.code !== "SERVICE_UNAVAILABLE") throw e;
        route = { spawn: true, connection: route.connection };
      }
    }
    const args = this.argv(verb, flags, positional, route.connection);
    return new Promise((resolve2, reject) => {
      let child;
      try {
        child = this.spawn(args);
      } catch (e) {
        reject(e);
        return;
      }
      let err = "";
      const timer = bounded ? setTimeout(() => child.kill("SIGTERM"), CALL_TIMEOUT_MS) : void 0;
      const onAbort = () => child.kill("SIGTERM");
      if (signal?.aborted) onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      child.stderr.setEncoding("utf8").on("data", (d) => err += d);
      createInterface({ input: child.stdout }).on("line", onLine);
      child.on("error", (e) => {
        clearTimeout(timer);
        reject(notFound(this.options.bin, e));
      });
      child.on("close", (code) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve2({ code, err });
      });
      child.stdin.on("error", () => {
      });
      child.stdin.end(input);
    });
  }
  /**
   * One call: its envelope, or a SubagentsError with the envelope's code.
   * With input, the request goes to stdin as JSON (--input -).
   */
  async call(verb, flags = [], positional = [], input, signal) {
    let out = "";
    const { code, err } = await this.exec(
      verb,
      input === void 0 ? flags : [...flags, "--input", "-"],
      positional,
      input === void 0 ? "" : JSON.stringify(input),
      (line) => out += line + "\n",
      signal
    );
    let env;
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
  async follow(id, onFrame, signal, timeoutMs) {
    const flags = ["--progress", ...timeoutMs ? ["--timeout-ms", String(timeoutMs)] : []];
    let last;
    const { code, err } = await this.exec(
      "wait",
      flags,
      [id],
      "",
      (line) => {
        if (!line.trim()) return;
        try {
          const env = JSON.parse(line);
          if (env.op === "progress") onFrame(env);
          else last = env;
        } catch {
        }
      },
      signal,
      false
    );
    if (last?.error) throw new SubagentsError(last.error.code, last.error.message, last.error.category);
    if (last) return last;
    if (signal?.aborted) throw new SubagentsError("CANCELLED", "waiting was aborted");
    throw new SubagentsError("SUBAGENT_FAILED", `subagents wait exited ${code}: ${err.trim() || "no output"}`);
  }
};
function notFound(bin, e) {
  if (e.code === "ENOENT") {
    return new SubagentsError(
      "SERVICE_UNAVAILABLE",
      `the subagents command was not found (${bin}): set SUBAGENTS_BIN or the extension's "bin" setting, or put it on PATH (\`make build\` writes bin/subagents)`
    );
  }
  return new SubagentsError("SERVICE_UNAVAILABLE", `could not run ${bin}: ${e.message}`);
}

// src/delivery.ts
import { existsSync as existsSync2, mkdirSync as mkdirSync3, readFileSync as readFileSync4, statSync as statSync2, unlinkSync as unlinkSync3 } from "node:fs";
import { hostname } from "node:os";
import { join as join4 } from "node:path";

// src/format.ts
function planHeader(env) {
  const plan = env.plan;
  if (!plan) return "";
  const done = plan.steps.filter((s) => s.state === "completed").length;
  const counts = ["running", "failed", "skipped", "cancelled"].map((st) => [st, plan.steps.filter((s) => s.state === st).length]).filter(([, n]) => n > 0).map(([st, n]) => `${n} ${st}`);
  const head = `Plan ${plan.name || ""}${plan.name ? " " : ""}[plan_id: ${env.delegation_id}] \xB7 ${done}/${plan.steps.length} steps done${counts.length ? ` (${counts.join(", ")})` : ""}${plan.attempt > 1 ? ` \xB7 attempt ${plan.attempt}` : ""}`;
  const notes = plan.steps.filter((s) => (s.round ?? 0) > 1 || (s.gateRuns ?? 0) > 0 || s.verdict || s.reused).map((s) => {
    const bits = [];
    if ((s.round ?? 0) > 0) bits.push(`round ${s.round}`);
    if (s.verdict) bits.push(`verdict ${s.verdict}`);
    if (s.gateRuns) bits.push(`gate ran ${s.gateRuns}\xD7`);
    if (s.reused) bits.push("kept from an earlier attempt");
    return `  \xB7 ${[...s.path ?? [], s.key].join("/")}: ${bits.join(", ")}`;
  });
  const stopped = plan.stopped ? [`  \u2715 ${plan.stopped.code}: ${plan.stopped.message}`] : [];
  return [head, ...notes, ...stopped].join("\n") + "\n\n";
}
var ZERO_USAGE = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0 };
function items(env) {
  return env.items ?? [];
}
function succeeded(it) {
  return it.status === "completed" && it.finalize?.status !== "ERROR";
}
function cancelled(it) {
  return it.status === "cancelled";
}
function heldDelegations(env) {
  return env.delegation_id && env.done ? [env.delegation_id] : [];
}
function ended(it) {
  return it.done && !succeeded(it);
}
function failedResult(env) {
  return items(env).some(ended) || env.wait_status === "timeout" || env.wait_status === "aborted";
}
function modelParts(provider, model) {
  const p = provider && provider !== "default" ? provider : "";
  const m = model && model !== "default" ? model : "";
  if (!m) return {};
  if (p && !m.startsWith(`${p}/`)) return { provider: p, model: m, label: `${p}/${m}` };
  const cut = m.indexOf("/");
  return cut > 0 ? { provider: m.slice(0, cut), model: m.slice(cut + 1), label: m } : { model: m, label: m };
}
function modelLabel(it) {
  return modelParts(it.provider, it.model).label;
}
function itemText(it, output = it.output) {
  if (succeeded(it)) return output || "(no text output from sub-agent)";
  const parts = [];
  if (cancelled(it)) parts.push(`Task cancelled${it.error?.message ? ` (${it.error.message})` : ""}: it was stopped before it finished.`);
  else if (it.error) parts.push(`Error (${it.error.code}): ${it.error.message}`);
  else if (!it.done) parts.push(`Task still ${it.status} when this call returned.`);
  else parts.push(`Task ended with status ${it.status}.`);
  if (output) parts.push(`Partial output:
${output}`);
  if (it.session_file) parts.push(`Session file: ${it.session_file}`);
  return parts.join("\n\n");
}
function agentErrorMessage(message) {
  const m = /^Unknown profile: "([^"]*)"\. Available profiles: (.*)$/s.exec(message);
  return m ? `Unknown agent: ${m[1]}. Available agents: ${m[2]}` : message;
}
function listLine(r) {
  const kind = r.kind === "session" && r.delegation_id === `delegation-${r.id}` ? `delegation ${r.delegation_id} \xB7 session` : r.kind;
  return `${kind} ${r.id} \xB7 ${r.status ?? r.execution_status}${r.name ? ` \xB7 ${r.name}` : ""}${r.ui_url ? `
  ${r.ui_url}` : ""}`;
}
function runId(env) {
  const it = items(env)[0];
  const key = env.delegation_id ?? (it && `${it.task_id}#${it.turn ?? 0}`);
  if (!key) return void 0;
  return (/[0-9a-f]{8}$/i.exec(key)?.[0] ?? fnv1a(key)).toLowerCase();
}
function fnv1a(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(16).padStart(8, "0");
}
var SINGLE_RESULT_CODES = /* @__PURE__ */ new Set([
  "INVALID_INPUT",
  "SUBAGENTS_DISABLED",
  "UNKNOWN_AGENT",
  "SUBAGENT_DISABLED",
  "SUBAGENT_DEPTH_EXCEEDED",
  "SUBAGENT_TIMEOUT",
  "SUBAGENT_FAILED",
  "SUBAGENT_OUTPUT_TRUNCATED"
]);
function subagentErrorCode(code) {
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
function subagentError(code, message) {
  return { code: subagentErrorCode(code), message, unified_code: code };
}
function sizeText(bytes) {
  if (bytes < 1024) return `${bytes}B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}
function cutAtBoundary(text2, max, cut = false) {
  const chars = Array.from(text2);
  if (chars.length <= max && !cut) return text2;
  const kept = chars.slice(0, max).join("");
  const half = Math.floor(kept.length / 2);
  const line = kept.lastIndexOf("\n");
  const space = Math.max(kept.lastIndexOf(" "), kept.lastIndexOf("	"));
  const end = line >= half ? line : space >= half ? space : kept.length;
  return kept.slice(0, end).trimEnd();
}
function truncatedOutput(it, full) {
  if (!it.output_truncated) return it.output;
  const source2 = full ?? it.output;
  const max = it.output_returned_chars || Array.from(it.output).length;
  const shown = cutAtBoundary(source2, max, full === void 0);
  if (full !== void 0 && shown === full) return full;
  const marker = full !== void 0 ? `[TRUNCATED: showing first ${shown.split("\n").length} of ${full.split("\n").length} lines, ${sizeText(Buffer.byteLength(shown))} of ${sizeText(Buffer.byteLength(full))}]` : `[TRUNCATED: showing first ${Array.from(shown).length} of ${it.output_total_chars} characters]`;
  return `${shown}
${marker}`;
}
function childRan(it) {
  return (it.attempts ?? 0) > 0 || !!it.session_file || !it.done;
}
function finalizedOf(it, full) {
  const f = it.finalize;
  if (!f) return void 0;
  if (f.status === "ERROR") return { status: f.status, error: f.error ?? "", ...f.result ? { result: f.result } : {} };
  return { status: f.status, result: it.output_truncated && full || f.result || "" };
}
function displayItems(it) {
  const out = [];
  for (const row of it.tool_rows ?? []) {
    let args = {};
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
function subagentResult(env, agent, task, full) {
  const it = items(env)[0];
  if (!it) {
    const message = env.error ? agentErrorMessage(env.error.message) : "The delegation ended without a task.";
    const error2 = subagentError(env.error?.code ?? "SUBAGENT_FAILED", message);
    return { text: message, details: { mode: "single", results: [], error: error2 } };
  }
  const ok = succeeded(it);
  const unknown = it.error?.code === "UNKNOWN_AGENT";
  const error = it.error ? subagentError(it.error.code, unknown ? agentErrorMessage(it.error.message) : it.error.message) : void 0;
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
    error: ok ? void 0 : error?.message,
    sessionFile: it.session_file,
    // The whole sanitized output: the contract cuts only content[0].text.
    output,
    displayItems: displayItems(it),
    model: modelLabel(it)
  };
  const details = {
    mode: "single",
    // The task's own state (the status vocabulary): completed, failed, cancelled, timed_out, ...
    status: it.status,
    runId: ran ? runId(env) : void 0,
    results: ran ? [result] : [],
    error,
    sessionId: it.task_id,
    delegationIds: heldDelegations(env),
    finalized: finalizedOf(it, full),
    uiUrl: it.ui_url
  };
  if (unknown && error) return { text: error.message, details };
  const body = itemText(it, truncatedOutput(it, full));
  const text2 = `**Status:** ${ok ? "SUCCESS" : cancelled(it) ? "CANCELLED" : "ERROR"}
**Session ID:** \`${it.task_id}\`

---

${body}`;
  return { text: text2, details };
}
function summaryLine(it) {
  const name = it.name ?? it.task_id;
  const session = `(session: ${it.task_id})${profileInfo(it)}`;
  if (!it.done) return `\u2026 ${name}: ${it.status} ${session}`;
  if (it.status === "completed" && it.finalize?.status !== "ERROR") return `\u2713 ${name}: completed ${session}`;
  const msg = it.error?.message ?? it.finalize?.error ?? it.status;
  if (cancelled(it)) return `\u2298 ${name}: cancelled \u2014 ${msg} ${session}`;
  return `\u2717 ${name}: error \u2014 ${msg} ${session}`;
}
function profileInfo(it) {
  if (!it.agent || it.agent === "default") return "";
  const label = modelLabel(it);
  const model = label ? `, model: ${label}${it.thinking ? `:${it.thinking}` : ""}` : "";
  return ` (profile: ${it.agent}${model})`;
}
function statusHeader(list) {
  return statusLine(list.map(windowStatus));
}
function statusLine(statuses) {
  const n = (s) => statuses.filter((x) => x === s).length;
  return `Sub-agents: ${n("running")} running, ${n("done")} done, ${n("error")} error${n("cancelled") ? `, ${n("cancelled")} cancelled` : ""}`;
}
function windowStatus(it) {
  return !it.done ? "running" : succeeded(it) ? "done" : cancelled(it) ? "cancelled" : "error";
}
function windowOf(it) {
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
    error: it.error?.message
  };
}
function modelFields(it) {
  const m = modelParts(it.provider, it.model);
  return { provider: m.provider ?? "", model: m.model ?? "" };
}
var WINDOW_ICONS = {
  running: ["warning", "\u23F3"],
  done: ["success", "\u2713"],
  error: ["error", "\u2717"],
  cancelled: ["warning", "\u2298"]
};
function windowTitle(w, style) {
  const [color, glyph] = WINDOW_ICONS[w.status];
  const icon2 = style.fg(color, glyph);
  const label = modelParts(w.provider, w.model).label;
  const model = label ? ` (${label}${w.thinking ? ` ${w.thinking}` : ""})` : w.thinking ? ` (thinking ${w.thinking})` : "";
  const time2 = w.timeout ? `${seconds(w.elapsedMs)}s/${w.timeout}s` : `${seconds(w.elapsedMs)}s`;
  return [`${icon2} ${style.bold(w.name)}`, `${w.profile}${model}`, `${w.toolCount} tools`, time2].join(" \u2022 ");
}
var plain = { fg: (_color, text2) => text2, bold: (text2) => text2 };
function seconds(ms) {
  return Math.floor(ms / 1e3);
}
function windowHeader(it) {
  return windowTitle(windowOf(it), plain);
}
function progressText(env, maxLines = 3) {
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
function toolRowText(row) {
  let args = {};
  try {
    args = JSON.parse(row.args);
  } catch {
  }
  const mark = row.status === "running" ? "\xB7" : row.status === "error" ? "\u2717" : "\u2713";
  if (row.name === "ls" && typeof args.path === "string") return `${mark} ls \u2192 ${args.path}`;
  if (row.name === "find" && typeof args.pattern === "string") return `${mark} find \u2192 ${args.pattern}${typeof args.path === "string" ? ` in ${args.path}` : ""}`;
  return `${mark} ${row.name} ${oneLine(row.args, 80)}`;
}
function oneLine(s, n) {
  const flat = s.split(/\s+/).filter(Boolean).join(" ");
  return flat.length > n ? `${flat.slice(0, n - 1)}\u2026` : flat;
}
function delegateResult(env, maxLines = 10) {
  const list = items(env);
  const text2 = list.map(summaryLine).join("\n");
  const details = {
    windows: list.map(
      (it) => ({
        ...windowOf(it),
        // What the window shows: the tool calls, then the answer.
        lines: [...(it.tool_rows ?? []).map(toolRowText), ...it.done && it.output ? it.output.split("\n") : []],
        uiUrl: it.ui_url
      })
    ),
    maxLinesPerWindow: maxLines,
    status: env.done ? "done" : "running",
    sessionIds: list.map((it) => it.task_id),
    delegationIds: heldDelegations(env),
    uiUrl: env.ui_url
  };
  return { text: text2, details };
}
function taskTree(it, prompt) {
  const icon2 = !it.done ? "\u280B" : succeeded(it) ? "\u2713" : cancelled(it) ? "\u2298" : "\u2715";
  const title = `${capitalize(it.agent)} \xB7 ${it.description ?? it.name ?? it.task_id}`;
  const lines = [`${icon2} ${title} [task_id: ${it.task_id}]`];
  const rows = [];
  if (prompt) rows.push(oneLine(prompt, 100));
  for (const row of (it.tool_rows ?? []).slice(-6)) rows.push(toolRowText(row));
  if (it.change && !it.change.empty) {
    rows.push(`change on branch ${it.change.branch} (${(it.change.files ?? []).length} file(s)): task op "apply" with this task_id applies it`);
  }
  let last;
  if (!it.done && it.question) last = questionLine(it);
  else if (!it.done) last = it.last_text ? oneLine(it.last_text, 100) : "Working...";
  else if (succeeded(it)) last = it.output || "(no text output from sub-agent)";
  else if (cancelled(it)) last = `Task cancelled: ${it.error?.message ?? "stopped before it finished"}`;
  else last = `Task failed: ${it.error?.message ?? it.status}`;
  for (const r of rows) lines.push(`  \u251C\u2500\u2500 ${r}`);
  lines.push(`  \u2570\u2500\u2500 ${last}`);
  return lines.join("\n");
}
function questionLine(it) {
  const q = it.question;
  return `Asks you (${q.reason}): ${q.message}
      Answer with the task tool: op "reply", id "${it.task_id}", message: your answer. Its run waits until then${q.deadline ? ` (until ${q.deadline})` : ""}.`;
}
function asking(env) {
  return items(env).filter((it) => !it.done && it.question && (it.question.state === "pending" || !it.question.state));
}
function capitalize(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
function taskItem(it, invocation) {
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
    ui_url: it.ui_url
  };
}
function taskErrorCode(op, code) {
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
function taskDetails(op, env, invocation) {
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
    task_id: list.length === 1 ? first.task_id : void 0,
    status: list.length === 1 ? first.status : env.status,
    subagent_type: list.length === 1 ? first.agent : void 0,
    description: list.length === 1 ? first.description ?? first.name : void 0,
    done: env.done,
    wait_status: env.wait_status,
    cancel_applied: env.cancel_applied,
    prior_status: env.prior_status,
    total_count: env.total_count,
    accepted_count: env.accepted_count,
    rejected_count: env.rejected_count,
    batch_status: env.batch_status,
    output_available: list.length === 1 ? first.output_available : void 0,
    output: list.length === 1 ? first.output : void 0,
    output_truncated: list.length === 1 ? first.output_truncated : void 0,
    output_total_chars: list.length === 1 ? first.output_total_chars : void 0,
    output_returned_chars: list.length === 1 ? first.output_returned_chars : void 0,
    items: list.map((it) => taskItem(it, invocation)),
    delegationIds: heldDelegations(env),
    ui_url: env.ui_url,
    plan: env.plan
  };
}
function deliveryText(env, what = env.delegation_id) {
  const list = items(env);
  const lines = [`Background sub-agent results (${what}):`];
  for (const it of list) {
    lines.push("", summaryLine(it));
    const body = succeeded(it) ? it.output : itemText(it);
    if (body) lines.push(body);
  }
  return lines.join("\n");
}
function shortTime(iso, now = /* @__PURE__ */ new Date()) {
  if (!iso) return void 0;
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return void 0;
  const pad = (n) => String(n).padStart(2, "0");
  const hm = `${pad(t.getHours())}:${pad(t.getMinutes())}`;
  const day = `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}`;
  const today = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
  return day === today ? `today ${hm}` : `${day} ${hm}`;
}
function strayHint(r, now = /* @__PURE__ */ new Date()) {
  const n = r.open;
  const s = r.sessions.length;
  const when = shortTime(r.latest, now);
  const facts = [when && `the latest started ${when}`, r.running > 0 && `${r.running} still running`].filter(Boolean).join(", ");
  return `subagents: ${n} delegation${n === 1 ? "" : "s"} of ${s === 1 ? "an earlier pi session" : `${s} earlier pi sessions`} in this folder wait${n === 1 ? "s" : ""} for nobody${facts ? ` (${facts})` : ""}: /subagents-adopt takes ${n === 1 ? "its result" : "their results"} into this session`;
}
function adoptedLine(taken, running, from) {
  if (taken === 0) return "subagents: nothing to take: no earlier pi session of this folder has results that nobody waits for";
  const still = running > 0 ? `; ${running} still running, ${running === 1 ? "its result comes" : "their results come"} when done` : "";
  return `subagents: took ${taken} delegation${taken === 1 ? "" : "s"} of ${from.join(", ")} into this session${still}`;
}
var NO_PROFILES_TEXT = "No subagent profiles found. Add .md files to ~/.pi/agent/agent-profiles/ or .pi/agent-profiles/.";
function sessionNotFound(id) {
  return `Session "${id}" not found. The session may have expired or the ID is incorrect.`;
}
function primaryToolName(profile, taken) {
  const base = profile.toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/^_+|_+$/g, "") || "subagent";
  let name = base;
  if (taken.has(name)) name = `${base}_subagent`;
  for (let i = 2; taken.has(name); i++) name = `${base}_subagent_${i}`;
  return name;
}
function primaryPrompt(ask, context, files) {
  const parts = [ask.trim()];
  if (context?.trim()) parts.push(`Context:
${context.trim()}`);
  if (files?.length) parts.push(`Files:
${files.map((f) => `- ${f}`).join("\n")}`);
  return parts.join("\n\n");
}
function resultText(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text ?? "").join("\n");
}
function renderDelegation(windows, opts, style) {
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
function renderTruncated(text2, opts, style) {
  const lines = text2.split("\n");
  if (opts.expanded || lines.length <= opts.maxLines) return text2;
  return [...lines.slice(0, opts.maxLines), style.fg("dim", `... (${lines.length - opts.maxLines} more lines)`)].join("\n");
}

// src/liveness.ts
import { closeSync as closeSync2, openSync as openSync2, readdirSync, readFileSync as readFileSync2, renameSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { join as join2 } from "node:path";
function pendingDir(dataDir2) {
  return join2(dataDir2, "pending");
}
function markName(s) {
  return /^[A-Za-z0-9_-]+$/.test(s);
}
function processStart(pid) {
  try {
    const stat = readFileSync2(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19] || void 0;
  } catch {
    return void 0;
  }
}
var self;
function thisProcess() {
  self ??= { pid: process.pid, start: processStart(process.pid) };
  return self;
}
function isThisProcess(h) {
  const me = thisProcess();
  return h !== void 0 && h.pid === me.pid && (h.start ?? "") === (me.start ?? "");
}
function alive(h) {
  if (!h || !Number.isInteger(h.pid) || h.pid <= 0) return false;
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    return false;
  }
  if (!h.start) return true;
  const now = processStart(h.pid);
  return now === void 0 || now === h.start;
}
function readMark(path) {
  let text2;
  try {
    text2 = readFileSync2(path, "utf8");
  } catch {
    return {};
  }
  try {
    const m = JSON.parse(text2);
    return m && typeof m === "object" ? m : {};
  } catch {
    return {};
  }
}
function writeMark(path, mark) {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(mark), { mode: 384 });
  renameSync(tmp, path);
}
function withMarkLock(path, fn) {
  const lock = `${path}.lock`;
  for (let tries = 0; tries < 2; tries++) {
    let fd;
    try {
      fd = openSync2(lock, "wx", 384);
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
      let owner;
      try {
        owner = JSON.parse(readFileSync2(lock, "utf8"));
      } catch {
      }
      if (owner && alive(owner)) return void 0;
      try {
        unlinkSync(lock);
      } catch {
      }
      continue;
    }
    try {
      writeSync(fd, JSON.stringify(thisProcess()));
      closeSync2(fd);
      return fn();
    } finally {
      try {
        unlinkSync(lock);
      } catch {
      }
    }
  }
  return void 0;
}
function strays(dataDir2, cwd, except) {
  const dir = pendingDir(dataDir2);
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out = [];
  for (const id of names) {
    if (id === except || !markName(id)) continue;
    const path = join2(dir, id);
    const mark = readMark(path);
    if (mark.cwd !== cwd || alive(mark.holder)) continue;
    out.push({ id, path, mark });
  }
  return out;
}

// src/schedule.ts
import { createHash } from "node:crypto";
import { mkdirSync as mkdirSync2, readdirSync as readdirSync2, readFileSync as readFileSync3, realpathSync, renameSync as renameSync2, statSync, unlinkSync as unlinkSync2, utimesSync, writeFileSync as writeFileSync2 } from "node:fs";
import { join as join3 } from "node:path";
var SCHEDULE_HELP = "schedule op: {action: create|list|describe|pause|resume|trigger|update|delete, id, name, at (10m or RFC3339: once)|every (2h)|cron|calendar (hour=9 dow=mon-fri), timezone, overlap: skip|buffer_one|cancel_other|allow_all, catchup (1h|none), end, note, quiet (deliver failures only), tasks [{agent,prompt}] or agent+prompt, or plan (doc or saved name)+args}. Runs here with no pi open; results reach the next session here";
function schedulesOf(env) {
  return env.schedules ?? [];
}
function scheduleFolder(cwd) {
  try {
    return realpathSync(cwd);
  } catch {
    return cwd;
  }
}
function scheduledMark(dir, cwd) {
  return join3(dir, "scheduled", createHash("sha256").update(cwd).digest("hex").slice(0, 32));
}
function markScheduled(dir, cwd) {
  const path = scheduledMark(dir, cwd);
  mkdirSync2(join3(dir, "scheduled"), { recursive: true, mode: 448 });
  writeFileSync2(path, JSON.stringify({ cwd }), { mode: 384 });
}
var OPEN_RECORD_KEEP_MS = 31 * 24 * 36e5;
var OPEN_SWEEP_EVERY_MS = 24 * 36e5;
var SWEPT = ".swept";
function openDir(dir) {
  return join3(dir, "open");
}
function openRecordPath(dir, h) {
  return join3(openDir(dir), `${h.pid}-${h.start ?? "0"}`);
}
function readOpenRecord(path) {
  try {
    const r = JSON.parse(readFileSync3(path, "utf8"));
    return r && typeof r === "object" && r.holder && Array.isArray(r.spans) ? r : void 0;
  } catch {
    return void 0;
  }
}
function noteOpen(dir, holder, at, open) {
  try {
    mkdirSync2(openDir(dir), { recursive: true, mode: 448 });
    const path = openRecordPath(dir, holder);
    const rec = readOpenRecord(path) ?? { holder, spans: [] };
    for (const sp of rec.spans) sp.until ??= at;
    if (open) rec.spans.push({ ...open, since: at });
    const tmp = `${path}.tmp`;
    writeFileSync2(tmp, JSON.stringify(rec), { mode: 384 });
    renameSync2(tmp, path);
  } catch {
    return;
  }
  sweepOpenRecords(dir, at);
}
function sweepOpenRecords(dir, at) {
  const swept = join3(openDir(dir), SWEPT);
  try {
    if (at - statSync(swept).mtimeMs < OPEN_SWEEP_EVERY_MS) return;
  } catch {
  }
  let names;
  try {
    writeFileSync2(swept, "", { mode: 384 });
    const when = new Date(at);
    utimesSync(swept, when, when);
    names = readdirSync2(openDir(dir));
  } catch {
    return;
  }
  for (const name of names) {
    if (name.startsWith(".")) continue;
    const other = join3(openDir(dir), name);
    try {
      if (statSync(other).mtimeMs >= at - OPEN_RECORD_KEEP_MS) continue;
      if (name.endsWith(".tmp")) {
        unlinkSync2(other);
        continue;
      }
      const r = readOpenRecord(other);
      const last = Math.max(0, ...(r?.spans ?? []).map((sp) => sp.until ?? sp.since));
      if (r && !isThisProcess(r.holder) && last < at - OPEN_RECORD_KEEP_MS && !alive(r.holder)) unlinkSync2(other);
    } catch {
    }
  }
}
function openRecords(dir) {
  let names;
  try {
    names = readdirSync2(openDir(dir)).filter((n) => !n.startsWith(".") && !n.endsWith(".tmp"));
  } catch {
    return [];
  }
  return names.map((n) => readOpenRecord(join3(openDir(dir), n))).filter((r) => r !== void 0);
}
function openAt(records, cwd, me, t) {
  let found = "none";
  for (const r of records) {
    for (const sp of r.spans) {
      if (sp.cwd !== cwd || sp.since > t) continue;
      if (sp.until === void 0 && !alive(r.holder)) {
        if (found === "none") found = void 0;
        continue;
      }
      if (sp.until !== void 0 && sp.until < t) continue;
      if (sp.session === me) return "this";
      found = "another";
    }
  }
  return found;
}
function marksDir(cli) {
  return cli.options.local?.dataDir ?? dataDir(cli.options.env ?? process.env);
}
var ACTIONS = /* @__PURE__ */ new Set(["create", "list", "describe", "pause", "resume", "trigger", "update", "delete"]);
async function scheduleOp(cli, ctx, schedule) {
  if (!schedule || typeof schedule !== "object" || Array.isArray(schedule)) throw new SubagentsError("INVALID_INPUT", "schedule needs an object with an action");
  const req = schedule;
  if (typeof req.action !== "string" || !ACTIONS.has(req.action)) {
    throw new SubagentsError("INVALID_INPUT", `schedule.action must be one of ${[...ACTIONS].join(", ")}`);
  }
  const folder = scheduleFolder(ctx.cwd);
  const env = await cli.call("schedule", [], [], { cwd: folder, ...req });
  if (req.action === "create") {
    try {
      markScheduled(marksDir(cli), folder);
    } catch {
    }
  }
  return { env, text: scheduleText(req.action, env) };
}
function scheduleText(action, env) {
  const items2 = schedulesOf(env);
  if (action === "list") {
    if (items2.length === 0) return "No schedules in this folder.";
    return [`${items2.length} schedule(s) in this folder:`, ...items2.map((s) => `- ${oneLine2(s)}`)].join("\n");
  }
  if (action === "describe") return items2.map(describe).join("\n\n");
  const lines = [env.text ?? ""];
  for (const s of items2) if (action !== "delete") lines.push(oneLine2(s));
  return lines.filter(Boolean).join("\n");
}
function pausedFact(s) {
  const why = [s.paused_since ? `since ${s.paused_since}` : "", s.note ?? ""].filter(Boolean).join(": ");
  return `paused${why ? ` (${why})` : ""}: no fires until resumed (action "resume", id "${s.id}")`;
}
function oneLine2(s) {
  const facts = [s.spec, s.paused ? pausedFact(s) : s.next_fires?.[0] ? `next ${s.next_fires[0]}` : ""];
  const last = s.runs?.[0];
  if (last) facts.push(`last run ${last.status}`);
  return `${s.id}${s.name ? ` "${s.name}"` : ""}: ${facts.filter(Boolean).join(", ")}`;
}
function describe(s) {
  const lines = [
    oneLine2(s),
    `runs a ${s.kind ?? "delegation"} in ${s.cwd ?? "?"}; overlap ${s.overlap}, catchup ${s.catchup}${s.end ? `, ends ${s.end}` : ""}${s.quiet ? ", quiet (only failures are delivered)" : ""}`,
    `fired ${s.fires} time(s)${s.missed ? `, ${s.missed} missed` : ""}${s.skipped ? `, ${s.skipped} skipped by overlap` : ""}`
  ];
  if (s.note && !s.paused) lines.push(`note: ${s.note}`);
  if (s.next_fires?.length && !s.paused) lines.push(`next: ${s.next_fires.slice(0, 3).join(", ")}`);
  for (const r of s.runs ?? []) {
    const delivered = r.delivered ? ", delivered" : r.result_id ? ", waiting for a pi session here" : "";
    lines.push(`- ${r.fired} ${r.status}${r.delegation_id ? ` ${r.delegation_id}` : ""}${delivered}${r.summary ? `: ${r.summary}` : ""}`);
  }
  return lines.join("\n");
}

// src/delivery.ts
var SCHEDULE_MARK_GRACE_MS = 6e4;
function startsTurn(origin, interactive2) {
  return origin === "own" || origin === "earlier" && interactive2;
}
var previousAttemptExitMs = 8e3;
function nestedParent(env = process.env) {
  if (env.PI_SUBAGENT_CHILD !== "1" || env.PI_SUBAGENT_NESTED !== "1") return void 0;
  return env.PI_SUBAGENT_PARENT_SESSION || void 0;
}
var RESULT_MESSAGE_TYPE = "subagents-result";
var TURN_SENT_TYPE = "subagents-turn-sent";
function turnKey(session, turn) {
  return `${session}#${turn}`;
}
function sentTurns(entries) {
  const delivered = /* @__PURE__ */ new Set();
  const sent = /* @__PURE__ */ new Map();
  for (const e of entries) {
    if (e.type === "custom_message" && e.customType === RESULT_MESSAGE_TYPE && e.details?.turn) delivered.add(e.details.turn);
    if (e.type !== "custom" || e.customType !== TURN_SENT_TYPE || !e.data?.session || !e.data.turn) continue;
    const key = turnKey(e.data.session, e.data.turn);
    if (e.data.gone) delivered.add(key);
    else sent.set(key, { session: e.data.session, turn: e.data.turn });
  }
  return { delivered, pending: [...sent].filter(([k]) => !delivered.has(k)).map(([, t]) => t) };
}
function deliveredIds(entries) {
  const ids = /* @__PURE__ */ new Set();
  for (const e of entries) {
    if (e.type === "message" && e.message?.role === "toolResult") {
      for (const id of e.message.details?.delegationIds ?? []) ids.add(id);
    } else if (e.type === "custom_message" && e.customType === RESULT_MESSAGE_TYPE && e.details?.delegationId) {
      ids.add(e.details.delegationId);
    }
  }
  return ids;
}
var QUESTION_MESSAGE_TYPE = "subagents-question";
function questionKey(it) {
  return `${it.task_id}/${it.question?.id ?? ""}`;
}
function questionDraft(it, intro) {
  return {
    type: "custom_message",
    customType: QUESTION_MESSAGE_TYPE,
    content: `${intro}
${taskTree(it)}`,
    display: true,
    details: { questionId: questionKey(it) }
  };
}
function sendDraft(pi, d, options) {
  pi.sendMessage({ customType: d.customType, content: d.content, display: d.display, details: d.details }, options);
}
function toldInBranch(ctx) {
  const told = /* @__PURE__ */ new Set();
  for (const e of ctx.sessionManager.getBranch()) {
    if (e.type === "custom_message" && e.customType === QUESTION_MESSAGE_TYPE && e.details?.questionId) told.add(e.details.questionId);
  }
  return told;
}
function scheduledIntro(s) {
  const when = [s.fired ? `fired at ${s.fired}` : "", s.ended ? `ended at ${s.ended}` : "ended"].filter(Boolean).join(" and ");
  const where = {
    none: " while no pi session was open here",
    this: " while this session was open (a folder's scheduled results come when a session starts, or starts the service)",
    another: " while another pi session was open here (a folder's scheduled results come when a session starts)"
  }[s.open ?? ""] ?? "";
  return `A scheduled run of schedule ${s.schedule} (${s.run}) ${when}${where}; its result:`;
}
function turnDraft(env, sent) {
  const turn = env.items?.[0]?.turn ?? sent.turn;
  return {
    type: "custom_message",
    customType: RESULT_MESSAGE_TYPE,
    content: deliveryText(env, `turn ${turn} of ${sent.session}: the answer to the message sent to it while it ran`),
    display: true,
    details: { turn: turnKey(sent.session, sent.turn), envelope: env }
  };
}
function deliveryDraft(env, adoptedFrom, scheduled) {
  let text2 = deliveryText(env);
  if (adoptedFrom) text2 += `

(Taken with /subagents-adopt from the earlier pi session ${adoptedFrom}, where nobody waited for it.)`;
  if (scheduled) text2 = `${scheduledIntro(scheduled)}

${text2}`;
  return {
    type: "custom_message",
    customType: RESULT_MESSAGE_TYPE,
    content: text2,
    display: true,
    details: { delegationId: env.delegation_id, envelope: env, ...adoptedFrom && { adoptedFrom }, ...scheduled && { scheduled } }
  };
}
var Delivery = class {
  pi;
  cli;
  /** Delegations acknowledged by this process. */
  acked = /* @__PURE__ */ new Set();
  /** Background delegations this process waits for, by ID. */
  watchers = /* @__PURE__ */ new Map();
  /** Finished results not yet in the session, with where they come from. */
  ready = /* @__PURE__ */ new Map();
  /**
   * Questions of background tasks' children that this session has not
   * been told of yet, by questionKey; told: those it has. A question
   * needs the model's answer, so it is handed over as a result is.
   */
  questions = /* @__PURE__ */ new Map();
  told = /* @__PURE__ */ new Set();
  /** Where each watched delegation comes from. */
  origins = /* @__PURE__ */ new Map();
  /** Adopted delegations: the session each came from. */
  adoptedFrom = /* @__PURE__ */ new Map();
  /** Messages sent to running tasks whose answers this session waits for, by turnKey (watchTurn). */
  turns = /* @__PURE__ */ new Map();
  /** Results of scheduled runs this session claimed, by delegation ID: where each waits to be acknowledged. */
  scheduledFrom = /* @__PURE__ */ new Map();
  /** Sessions whose marks this process wrote by delegating: such a mark stays until its work is acknowledged. */
  delegatedHere = /* @__PURE__ */ new Set();
  /** The sessions whose marks this process holds: its own, and those whose results it adopted. */
  held = /* @__PURE__ */ new Set();
  /** Results handed to pi (drafts or messages) and not yet seen persisted. */
  handed = /* @__PURE__ */ new Set();
  /**
   * Delegations this process started or continued: their results come
   * back as the tool result of the call that waits for them, or through
   * watch (async); a look for earlier results must not find them again.
   */
  mine = /* @__PURE__ */ new Set();
  /** Starts and sends under way: a look for earlier results waits for them (see own). */
  starting = /* @__PURE__ */ new Set();
  /** The look for earlier results under way: looks run one after another. */
  resuming = Promise.resolve();
  waiters = [];
  parentId = "";
  ctx;
  /** Set once the session shut down: nothing new is watched or delivered. */
  closed = false;
  /** Whether this process noted a session open (opened): its close is noted at shutdown. */
  openNoted = false;
  /** The local service's data dir, where this parent marks that it waits for results; undefined for a remote Temporal. */
  dataDir;
  constructor(pi, cli, dataDir2 = () => void 0) {
    this.pi = pi;
    this.cli = cli;
    this.dataDir = dataDir2;
  }
  /**
   * The parent session ID every delegation records: pi's session, or in
   * a child that delegates the task's session (nestedParent), so that
   * what it starts is listed and cancelled under that task, and a run of
   * it retried after a worker restart finds its results by that ID.
   */
  parent(ctx) {
    return nestedParent() ?? ctx.sessionManager.getSessionId();
  }
  /**
   * The parent session ID for a delegation whose results come back here:
   * it also marks, in the data dir, that this session waits for results,
   * so that its next start looks for them (while the service runs: a
   * look never starts it), and otherwise asks nothing.
   */
  delivering(ctx) {
    const id = this.parent(ctx);
    const marker = this.marker(id);
    if (marker) {
      try {
        mkdirSync3(pendingDir(this.dataDir()), { recursive: true, mode: 448 });
        writeMark(marker, { holder: thisProcess(), cwd: ctx.cwd, session: ctx.sessionManager.getSessionFile(), at: Date.now() });
        this.delegatedHere.add(id);
        this.held.add(id);
      } catch (e) {
        throw new SubagentsError("SERVICE_UNAVAILABLE", `cannot mark ${marker} (where a restarted pi looks for results): ${e.message}`);
      }
    }
    return id;
  }
  /** Whether this session may have results waiting (see delivering). */
  mayHavePending(ctx) {
    const marker = this.marker(this.parent(ctx));
    return marker !== void 0 && existsSync2(marker);
  }
  /** Whether results of this folder's scheduled runs may wait for a session here (its schedule mark). */
  mayHaveScheduled(ctx) {
    return nestedParent() === void 0 && existsSync2(scheduledMark(this.marksDir(), scheduleFolder(ctx.cwd)));
  }
  /** Where this pi keeps the schedule marks and the record of open sessions. */
  marksDir() {
    return this.dataDir() ?? dataDir(process.env);
  }
  /**
   * Notes that this session is open in its folder from now on (a child's
   * pi is no session of the folder): a scheduled run's result says
   * whether a session was open there when the run ended (schedule.ts).
   */
  opened(ctx, now = Date.now()) {
    if (process.env.PI_SUBAGENT_CHILD === "1") return;
    noteOpen(this.marksDir(), thisProcess(), now, { cwd: scheduleFolder(ctx.cwd), session: ctx.sessionManager.getSessionId() });
    this.openNoted = true;
  }
  marker(parentId) {
    const dir = this.dataDir();
    return dir && markName(parentId) ? join4(pendingDir(dir), parentId) : void 0;
  }
  /**
   * Takes the session's mark for this process, unless another live pi
   * holds it (the same session open in two pis, or its results adopted
   * by a pi in its folder): then that pi gets them, and this one must not
   * deliver them a second time. An empty mark (an older extension's) is
   * filled in.
   */
  claim(marker, ctx) {
    const taken = withMarkLock(marker, () => {
      if (!existsSync2(marker)) return true;
      const m = readMark(marker);
      if (m.holder && !isThisProcess(m.holder) && alive(m.holder)) return false;
      writeMark(marker, { ...m, holder: thisProcess(), cwd: m.cwd ?? ctx.cwd, session: m.session ?? ctx.sessionManager.getSessionFile() });
      return true;
    });
    if (taken === true) this.held.add(this.parent(ctx));
    return taken === true;
  }
  /**
   * claim, waiting in a nested child for the pi of its task's previous
   * attempt to exit: the worker ends that pi before it runs the next
   * attempt on the same session, but the pi may still be exiting when the
   * next one starts, and its mark is then this attempt's to take (else
   * the grandchild's result never reaches the retried child). A user's pi
   * never waits: another live pi on its session is a real second holder.
   */
  async claimAfterPreviousAttempt(marker, ctx) {
    if (this.claim(marker, ctx)) return true;
    if (nestedParent() === void 0) return false;
    const deadline = Date.now() + previousAttemptExitMs;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      if (this.claim(marker, ctx)) return true;
    }
    return false;
  }
  running() {
    return [...this.watchers.keys()];
  }
  /** How many delegations of origin are still waited for. */
  waitingFor(origin) {
    return [...this.watchers.keys()].filter((id) => this.origins.get(id) === origin).length;
  }
  /** Waits until no delegation of origin is waited for any more (each has arrived, or its wait broke). */
  async settled(origin, signal) {
    while (this.waitingFor(origin) > 0 && !signal?.aborted) {
      await new Promise((resolve2) => {
        this.waiters.push(resolve2);
        signal?.addEventListener("abort", () => resolve2(), { once: true });
      });
    }
  }
  /**
   * Marks the delegation a start or send of this process returns as its
   * own. A look for earlier results that runs meanwhile (the service this
   * very call started) waits for it, so that it never takes the new
   * delegation for an earlier one and delivers its result a second time.
   */
  async own(call) {
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
   * session that marked itself waiting asks anything: any other has
   * nothing to get, and its start makes no call. A remote Temporal keeps
   * no marks and is asked each time. The look is passive: it asks only a
   * service that runs already, since only a delegation or an explicit
   * command starts the service (a stopped one stays stopped); the
   * results wait in Temporal, and the look runs again when this pi starts
   * the service (onServiceStarted) or at the session's next start.
   */
  resume(ctx) {
    const next = this.resuming.then(async () => {
      let failed;
      try {
        await this.resumeNow(ctx);
      } catch (e) {
        failed = e;
      }
      try {
        await this.scheduledNow(ctx);
      } catch (e) {
        failed ??= e;
      }
      if (failed !== void 0) throw failed;
    });
    this.resuming = next.catch(() => {
    });
    return next;
  }
  /**
   * Claims, for this session, the results of this folder's scheduled runs
   * that wait for a session (docs/schedules.md#results), and delivers them.
   * The service decides each claim: when two pis start here at once, each
   * result goes to one of them. A result another session claimed stays
   * its own unless that session's pi (on this machine) is gone: then it is
   * taken over (the service lets one pi do that). A result this session
   * claimed before and already holds (a restart) is only acknowledged.
   * A child that delegates takes none: its folder is its parent's.
   */
  async scheduledNow(ctx) {
    if (this.closed || nestedParent() !== void 0) return;
    if (!this.mayHaveScheduled(ctx)) return;
    const folder = scheduleFolder(ctx.cwd);
    const mark = scheduledMark(this.marksDir(), folder);
    this.ctx ??= ctx;
    this.parentId ||= this.parent(ctx);
    const me = this.parentId;
    const here = hostname();
    const self2 = thisProcess();
    let schedules = 0;
    const claim = async (replace) => {
      const env = await this.cli(true).call("schedule", [], [], {
        action: "claim",
        cwd: folder,
        by: me,
        holder: { pid: self2.pid, ...self2.start && { start: self2.start }, host: here },
        ...replace.length && { replace }
      });
      schedules = schedulesOf(env).length;
      return schedulesOf(env).flatMap((s) => (s.runs ?? []).map((r) => ({ schedule: s.id, run: r })));
    };
    let runs;
    try {
      runs = await claim([]);
    } catch (e) {
      if (e instanceof SubagentsError && e.notRunning) return;
      throw e;
    }
    const gone = [
      ...new Set(
        runs.filter(({ run }) => !run.result && run.claimed_by && run.claimed_by !== me && run.holder && (run.holder.host ?? here) === here && !alive(run.holder)).map(({ run }) => run.claimed_by)
      )
    ];
    if (gone.length) runs = await claim(gone);
    if (this.closed) return;
    if (schedules === 0) {
      try {
        if (statSync2(mark).mtimeMs < Date.now() - SCHEDULE_MARK_GRACE_MS) unlinkSync3(mark);
      } catch {
      }
    }
    const inSession = deliveredIds(ctx.sessionManager.getBranch());
    const toAck = [];
    const records = openRecords(this.marksDir());
    for (const { schedule, run } of runs) {
      const env = run.result;
      const id = env?.delegation_id;
      if (!env || !id || !run.result_id) continue;
      const ended2 = run.ended ?? run.fired;
      const t = Date.parse(ended2);
      const open = Number.isNaN(t) ? void 0 : openAt(records, folder, me, t);
      this.scheduledFrom.set(id, { schedule, run: run.id, fired: run.ended ? run.fired : void 0, ended: ended2, ...open && { open }, resultId: run.result_id });
      if (inSession.has(id)) toAck.push(id);
      else this.arrive(env, "scheduled");
    }
    if (toAck.length) await this.ack(toAck);
    if (!this.closed) this.flushIdle(ctx);
  }
  async resumeNow(ctx) {
    this.ctx = ctx;
    this.parentId = this.parent(ctx);
    const branch = ctx.sessionManager.getBranch();
    const delivered = deliveredIds(branch);
    for (const id of delivered) this.acked.add(id);
    const turns = sentTurns(branch);
    for (const key of turns.delivered) this.acked.add(key);
    const local = this.dataDir() !== void 0;
    if (local && !this.mayHavePending(ctx)) return;
    const own = this.marker(this.parentId);
    if (own && !await this.claimAfterPreviousAttempt(own, ctx)) return;
    let open;
    try {
      open = await this.openDelegations();
    } catch (e) {
      if (e instanceof SubagentsError && e.notRunning) return;
      throw e;
    }
    await Promise.allSettled([...this.starting]);
    if (this.closed) return;
    for (const t of turns.pending) this.watchTurn(t.session, t.turn, ctx, false);
    const marker = this.marker(this.parentId);
    if (marker && (open.runs ?? []).length === 0 && turns.pending.length === 0 && !this.delegatedHere.has(this.parentId)) {
      try {
        unlinkSync3(marker);
      } catch {
      }
    }
    const toAck = [];
    for (const run of open.runs ?? []) {
      if (delivered.has(run.id)) {
        toAck.push(run.id);
        continue;
      }
      if (this.mine.has(run.id)) continue;
      let env;
      try {
        env = await this.cli(true).call("status", [], [run.id]);
      } catch {
      }
      if (this.closed) return;
      if (env?.done) this.arrive(env, "earlier");
      else this.watch(run.id, "earlier");
    }
    if (toAck.length) await this.ack(toAck);
    if (!this.closed) this.flushIdle(ctx);
  }
  /**
   * Takes the results of another session of this folder that no pi
   * waits for (liveness.ts: strays) into this one: its mark is held by
   * this process from now on (another pi, or that session resumed, leaves
   * them), finished results are delivered at once, running ones when they
   * end. Each is acknowledged once it is written here, which closes it
   * for its own session too. Returns how many were taken and how many of
   * them still run; undefined when another live pi holds the session now.
   */
  async adopt(ctx, from) {
    this.ctx ??= ctx;
    this.parentId ||= this.parent(ctx);
    const took = withMarkLock(from.path, () => {
      if (!existsSync2(from.path)) return false;
      const m = readMark(from.path);
      if (alive(m.holder) && !isThisProcess(m.holder)) return false;
      writeMark(from.path, { ...m, holder: thisProcess() });
      return true;
    });
    if (took !== true) return void 0;
    this.held.add(from.id);
    const open = await this.cli().call("list", ["--kind", "delegation", "--open", "--parent-session", from.id]);
    let taken = 0;
    let running = 0;
    for (const run of open.runs ?? []) {
      if (this.acked.has(run.id) || this.adoptedFrom.has(run.id)) continue;
      this.adoptedFrom.set(run.id, from.id);
      taken++;
      let env;
      try {
        env = await this.cli().call("status", [], [run.id]);
      } catch {
      }
      if (this.closed) break;
      if (env?.done) this.arrive(env, "adopted");
      else {
        running++;
        this.watch(run.id, "adopted");
      }
    }
    if (taken === 0) this.dropMark(from.id, from.path);
    this.flushIdle(ctx);
    return { taken, running };
  }
  /**
   * Counts what the sessions of strays still hold open: what waits for
   * nobody. A stray whose delegations are all closed has its mark
   * removed (nothing of it is left to find). Passive: another session's
   * leftovers never start the service (a SubagentsError with notRunning
   * when none runs).
   */
  async strayReport(strays2) {
    const report = { sessions: [], open: 0, running: 0 };
    for (const s of strays2) {
      const open = await this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", s.id]);
      const runs = open.runs ?? [];
      if (runs.length === 0) {
        this.dropMark(s.id, s.path);
        continue;
      }
      const running = runs.filter((r) => r.status === "running" || r.status === "queued").length;
      report.sessions.push({ id: s.id, session: s.mark.session, open: runs.length, running });
      report.open += runs.length;
      report.running += running;
      for (const r of runs) if (!report.latest || r.started > report.latest) report.latest = r.started;
    }
    return report;
  }
  /** Removes a session's mark unless a live pi (other than this one) holds it. */
  dropMark(id, path) {
    withMarkLock(path, () => {
      const m = readMark(path);
      if (alive(m.holder) && !isThisProcess(m.holder)) return;
      try {
        unlinkSync3(path);
      } catch {
      }
    });
    this.held.delete(id);
  }
  /** Waits in the background for a delegation this parent started (own) or that waits for it. */
  watch(id, origin = "own") {
    if (!this.watchable(id)) return;
    this.follow(id, id, origin);
  }
  /**
   * Waits in the background for the answer of a message this session sent
   * to a running task: its turn `turn`, queued behind the turn under way,
   * which no delegation carries (a send to a task between turns starts one,
   * watched as any). The answer is delivered as a background result of
   * this session's is, once: keyed by the session and turn (turnKey).
   * record notes the wait in the session (an entry the model never reads),
   * so that a pi stopped before the answer came waits for it again at the
   * session's next start.
   */
  watchTurn(session, turn, ctx, record = true) {
    const key = turnKey(session, turn);
    if (!this.watchable(key)) return;
    if (ctx) {
      this.ctx ??= ctx;
      this.parentId ||= this.parent(ctx);
    }
    this.turns.set(key, { session, turn });
    if (record) this.pi.appendEntry(TURN_SENT_TYPE, { session, turn });
    this.follow(key, session, "own", (e) => {
      if (e instanceof SubagentsError && e.code === "SESSION_NOT_FOUND" && !this.closed) this.pi.appendEntry(TURN_SENT_TYPE, { session, turn, gone: true });
    });
  }
  watchable(key) {
    return !(this.closed || this.watchers.has(key) || this.ready.has(key) || this.handed.has(key) || this.acked.has(key));
  }
  /** Follows target (a delegation, or the session of a turn) until it ends, and hands its result over as key. */
  follow(key, target, origin, failed) {
    this.origins.set(key, origin);
    const abort = new AbortController();
    const done = this.cli().follow(target, (env) => this.noticeQuestions(env), abort.signal).then((env) => this.arrive(env, origin, this.turns.has(key) ? key : env.delegation_id)).catch((e) => {
      failed?.(e);
    }).finally(() => {
      this.watchers.delete(key);
      this.wake();
    });
    this.watchers.set(key, { abort, done });
  }
  /** A result is ready to hand over, as id: a delegation's ID (the envelope's), or a turn's key. */
  arrive(env, origin, id = env.delegation_id) {
    if (!id || this.acked.has(id) || this.handed.has(id)) return;
    this.ready.set(id, { env, origin });
    this.wake();
    if (this.ctx) this.flushIdle(this.ctx);
  }
  /**
   * A background task's child asked (docs/questions.md): the session is
   * told at once, as a result would be, since the child waits for it.
   */
  noticeQuestions(env) {
    const asked = asking(env);
    if (asked.length && this.ctx) this.toldOf(toldInBranch(this.ctx));
    let fresh = false;
    for (const it of asked) {
      const key = questionKey(it);
      if (this.told.has(key) || this.questions.has(key)) continue;
      this.questions.set(key, it);
      fresh = true;
    }
    if (!fresh) return;
    this.wake();
    if (this.ctx) this.flushIdle(this.ctx);
  }
  /** Marks questions told: by the first prompt's look, or read back from the session's branch. */
  toldOf(keys) {
    for (const k of keys) {
      this.told.add(k);
      this.questions.delete(k);
    }
  }
  takeQuestions() {
    const drafts = [...this.questions.values()].map((it) => questionDraft(it, 'A subagent task started in the background waits for your answer (task op "reply" with its id and your answer in message).'));
    this.toldOf([...this.questions.keys()]);
    return drafts;
  }
  wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  /**
   * Hands finished results to pi as custom messages when it is idle: they
   * are written at once, and in interactive modes start a turn.
   */
  flushIdle(ctx) {
    if (!ctx.isIdle() || this.ready.size + this.questions.size === 0) return;
    const interactive2 = ctx.mode === "tui" || ctx.mode === "rpc";
    for (const d of this.takeQuestions()) {
      sendDraft(this.pi, d, { triggerTurn: interactive2 });
    }
    for (const [id, { env, origin }] of this.ready) {
      this.ready.delete(id);
      this.handed.add(id);
      sendDraft(this.pi, this.draft(id, env), { triggerTurn: startsTurn(origin, interactive2) });
    }
    void this.ackPersisted(ctx);
  }
  /** The message that delivers the result ready as id: a delegation's, or the answer of a turn (turnDraft). */
  draft(id, env) {
    const sent = this.turns.get(id);
    return sent ? turnDraft(env, sent) : deliveryDraft(env, this.adoptedFrom.get(id), this.scheduledFrom.get(id));
  }
  /**
   * Finished results as boundary drafts (turn_end, agent_before_settle),
   * and whether one of them starts a turn (startsTurn): the others ride
   * with the next model call if there is one, and are in the session
   * either way.
   */
  takeDrafts(interactive2, only) {
    const entries = [];
    let turn = false;
    if (!only || only === "own") {
      const asked = this.takeQuestions();
      entries.push(...asked);
      turn ||= asked.length > 0;
    }
    for (const [id, { env, origin }] of this.ready) {
      if (only && origin !== only) continue;
      entries.push(this.draft(id, env));
      turn ||= startsTurn(origin, interactive2);
      this.ready.delete(id);
      this.handed.add(id);
    }
    return { entries, turn };
  }
  /**
   * Waits until a result of origin is ready or none of origin is waited
   * for any more (a print or JSON run, which pi ends when its agent
   * settles, waits so for the background work its model started).
   */
  async nextResult(signal, origin = "own") {
    const ready = () => [...this.ready.values()].some((r) => r.origin === origin) || origin === "own" && this.questions.size > 0;
    while (!ready() && this.waitingFor(origin) && !signal?.aborted) {
      await new Promise((resolve2) => {
        this.waiters.push(resolve2);
        signal?.addEventListener("abort", () => resolve2(), { once: true });
      });
    }
  }
  /** Acknowledges every delivered result that is written in the session file. */
  ackPersisted(ctx) {
    this.acking = this.acking.then(() => this.ackPersistedNow(ctx)).catch(() => {
    });
    return this.acking;
  }
  acking = Promise.resolve();
  async ackPersistedNow(ctx) {
    const branch = ctx.sessionManager.getBranch();
    const file = ctx.sessionManager.getSessionFile();
    let onDisk = "";
    try {
      onDisk = file ? readFileSync4(file, "utf8") : "";
    } catch {
      return;
    }
    const ids = [...deliveredIds(branch)].filter((id) => !this.acked.has(id) && onDisk.includes(id));
    if (ids.length) await this.ack(ids);
  }
  /**
   * Acknowledges delivered results. Passive: they were delivered while
   * the service ran; one stopped since stays stopped, and the session's
   * next look (which acknowledges what its branch holds) settles them.
   */
  async ack(all) {
    const scheduled = all.filter((id) => this.scheduledFrom.has(id));
    const ids = all.filter((id) => !this.scheduledFrom.has(id));
    if (scheduled.length) {
      try {
        const results = scheduled.map((id) => this.scheduledFrom.get(id)?.resultId);
        await this.cli(true).call("schedule", [], [], { action: "ack", by: this.parentId, ids: results });
        for (const id of scheduled) {
          this.acked.add(id);
          this.handed.delete(id);
        }
      } catch {
      }
    }
    if (ids.length === 0) return;
    try {
      await this.cli(true).call("ack", ["--by", this.parentId], ids);
      for (const id of ids) {
        this.acked.add(id);
        this.handed.delete(id);
      }
    } catch {
      return;
    }
    await this.clearMarkIfDone();
    for (const from of new Set(ids.map((id) => this.adoptedFrom.get(id)).filter((f) => f !== void 0))) {
      await this.clearAdoptedIfDone(from);
    }
  }
  async clearAdoptedIfDone(from) {
    const marker = this.marker(from);
    if (!marker || !this.held.has(from)) return;
    if ([...this.watchers.keys()].some((id) => this.adoptedFrom.get(id) === from)) return;
    try {
      const open = await this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", from]);
      if ((open.runs ?? []).every((r) => this.acked.has(r.id))) this.dropMark(from, marker);
    } catch {
    }
  }
  /** This session's delegations that are still open (not acknowledged); asks only a service that runs. */
  openDelegations() {
    return this.cli(true).call("list", ["--kind", "delegation", "--open", "--parent-session", this.parentId]);
  }
  /** Removes the session's waiting mark once none of its delegations is open. */
  async clearMarkIfDone() {
    const marker = this.marker(this.parentId);
    if (!marker || !existsSync2(marker) || [...this.watchers.keys()].some((id) => !this.adoptedFrom.has(id))) return;
    try {
      const open = await this.openDelegations();
      if ((open.runs ?? []).every((r) => this.acked.has(r.id))) {
        unlinkSync3(marker);
        this.delegatedHere.delete(this.parentId);
      }
    } catch {
    }
  }
  /**
   * Stops waiting (the work goes on, and is found again on the next
   * start), and lets go of the marks this process holds: what is still
   * open waits for nobody now, and a pi started later in the folder
   * offers it (a process killed lets go the same way: it is no longer
   * alive).
   */
  shutdown() {
    this.closed = true;
    if (this.openNoted) noteOpen(this.marksDir(), thisProcess(), Date.now());
    this.openNoted = false;
    for (const w of this.watchers.values()) w.abort.abort();
    this.watchers.clear();
    this.wake();
    for (const id of this.held) {
      const marker = this.marker(id);
      if (!marker) continue;
      try {
        withMarkLock(marker, () => {
          if (!existsSync2(marker)) return;
          const m = readMark(marker);
          if (!isThisProcess(m.holder)) return;
          const { holder: _released, ...rest } = m;
          writeMark(marker, rest);
        });
      } catch {
      }
    }
  }
};

// src/doctor.ts
import { spawn as spawn3 } from "node:child_process";

// src/answer.ts
var ANSWER_ENTRY_TYPE = "subagents-answer";
function answer(pi, ctx, command, text2, level = "info") {
  if (ctx.hasUI) {
    ctx.ui.notify(text2, level);
    return;
  }
  if (ctx.mode === "json") {
    pi.appendEntry(ANSWER_ENTRY_TYPE, { command, level, text: text2 });
    return;
  }
  process.stderr.write(`${text2}
`);
}

// src/doctor.ts
var DOCTOR_DEADLINE_S = 30;
var DOCTOR_STOP_MS = DOCTOR_DEADLINE_S * 1e3 + 15e3;
function doctorArgs(cwd, cli) {
  const args = ["doctor", "--json", "--cwd", cwd, "--timeout", `${DOCTOR_DEADLINE_S}s`, ...cli.options.connection];
  const local = cli.options.local;
  if (local) {
    if (local.taskQueue && !args.includes("--task-queue")) args.push("--task-queue", local.taskQueue);
    args.push("--data-dir", local.dataDir);
  }
  return args;
}
function runDoctor(bin, args, env, cwd, stopMs = DOCTOR_STOP_MS) {
  return new Promise((resolve2, reject) => {
    const child = spawn3(bin, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => child.kill("SIGTERM"), stopMs);
    child.stdout.setEncoding("utf8").on("data", (d) => out += d);
    child.stderr.setEncoding("utf8").on("data", (d) => err += d);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new SubagentsError("SERVICE_UNAVAILABLE", `could not run ${bin}: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      try {
        const report = JSON.parse(out);
        if (Array.isArray(report.checks)) return resolve2(report);
      } catch {
      }
      const why = signal ? `was stopped (${signal}) after ${stopMs / 1e3} s` : `exited ${code}`;
      reject(new SubagentsError("SUBAGENT_FAILED", `subagents doctor ${why}: ${err.trim() || out.trim() || "no output"}`));
    });
  });
}
var MARK = { ok: "\u2713", warn: "!", fail: "\u2717", skip: "\u2013" };
function formatReport(r) {
  const s = r.summary;
  const lines = [`subagents doctor: ${s.fail} failed, ${s.warn} ${s.warn === 1 ? "warning" : "warnings"}, ${s.ok} ok, ${s.skip} skipped (${r.context.cwd})`];
  for (const c of r.checks) {
    lines.push(`${MARK[c.status] ?? "?"} ${c.name}: ${c.verdict}`);
    if (c.fix && (c.status === "fail" || c.status === "warn")) lines.push(`    fix: ${c.fix}`);
  }
  const level = s.fail > 0 ? "error" : s.warn > 0 ? "warning" : "info";
  return { text: lines.join("\n"), level };
}
function registerDoctor(pi, cli) {
  pi.registerCommand("subagents-doctor", {
    description: "Check what durable subagents need here, each with a verdict and its fix",
    handler: async (_args, ctx) => {
      const c = cli(true);
      const base = c.options.env ?? process.env;
      const dir = c.options.local?.dataDir;
      const env = dir ? { ...base, SUBAGENTS_DATA_DIR: dir } : base;
      const bin = findBinary(c.options.bin === "subagents" ? void 0 : c.options.bin, env);
      if (!bin) {
        answer(pi, ctx, "subagents-doctor", `the subagents command was not found (${binarySearched()}): ${buildAdvice()}`, "error");
        return;
      }
      try {
        const { text: text2, level } = formatReport(await runDoctor(bin, doctorArgs(ctx.cwd, c), env, ctx.cwd));
        answer(pi, ctx, "subagents-doctor", text2, level);
      } catch (e) {
        answer(pi, ctx, "subagents-doctor", e.message, "error");
      }
    }
  });
}

// src/fleet.ts
import { spawn as spawn4 } from "node:child_process";
import { basename } from "node:path";

// src/fleet-view.ts
function oneTaskDelegation(sessionId) {
  return `delegation-${sessionId}`;
}
function time(iso) {
  if (!iso) return void 0;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? void 0 : t;
}
function runRow(r, scope) {
  const plan = r.id.startsWith("plan-") && r.kind !== "session";
  const oneTask = r.kind === "session" && r.delegation_id === oneTaskDelegation(r.id);
  const kind = plan ? "plan" : r.kind === "session" && !oneTask ? "session" : "delegation";
  return {
    id: r.id,
    kind,
    title: r.name || r.description || (kind === "session" ? r.agent : void 0) || `${kind} ${shortId(r.id)}`,
    // A plan lists as its own agent: its steps' rows name theirs.
    agent: plan && r.agent === "plan" ? void 0 : r.agent,
    status: r.status || r.execution_status,
    started: time(r.started),
    ended: time(r.closed),
    scope,
    depth: 0,
    session: r.kind === "session" ? r.id : void 0,
    open: r.open,
    uiUrl: r.ui_url
  };
}
var SCHEDULE_PARENT = "schedule:";
var SCHEDULE_RUNS_SHOWN = 3;
function fireTime(t, now, seconds2 = false) {
  if (t === void 0) return "-";
  const d = new Date(t);
  const n = new Date(now);
  const pad = (x) => String(x).padStart(2, "0");
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds2 ? `:${pad(d.getSeconds())}` : ""}`;
  if (d.toDateString() === n.toDateString()) return hm;
  const md = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return d.getFullYear() === n.getFullYear() ? `${md} ${hm}` : `${d.getFullYear()}-${md} ${hm}`;
}
function fleetRows(data, now = Date.now()) {
  const mine = new Set(data.mine.map((r) => r.id));
  const runs = [...data.mine.map((r) => runRow(r, "session")), ...data.folder.filter((r) => !mine.has(r.id)).map((r) => runRow(r, "folder"))];
  const items2 = new Map([...data.mine, ...data.folder].map((r) => [r.id, r]));
  const byId = new Map(runs.map((r) => [r.id, r]));
  const parentOf = (row) => {
    const r = items2.get(row.id);
    const d = r.delegation_id;
    if (d && d !== row.id && d !== oneTaskDelegation(row.id) && byId.has(d)) return d;
    const p = r.parent_session_id;
    if (p && p !== row.id && byId.get(p)?.session) return p;
    return void 0;
  };
  const children = /* @__PURE__ */ new Map();
  const roots = [];
  for (const row of runs) {
    const p = parentOf(row);
    if (p) children.set(p, [...children.get(p) ?? [], row]);
    else roots.push(row);
  }
  const placed = /* @__PURE__ */ new Set();
  for (const row of runs) {
    const kids = children.get(row.id);
    if (row.kind !== "delegation" || row.session || kids?.length !== 1) continue;
    const [task] = kids;
    if (task.kind !== "session" || (items2.get(row.id).name ?? "") !== (items2.get(task.id).name ?? "")) continue;
    row.session = task.id;
    row.agent = task.agent || row.agent;
    children.set(row.id, children.get(task.id) ?? []);
    children.delete(task.id);
    placed.add(task.id);
  }
  const newest = (a, b) => (b.started ?? 0) - (a.started ?? 0);
  const oldest = (a, b) => (a.started ?? 0) - (b.started ?? 0);
  const walk = (into, row, depth, scope, schedule) => {
    if (placed.has(row.id)) return;
    placed.add(row.id);
    into.push({ ...row, depth, scope, ...schedule !== void 0 && { schedule } });
    for (const c of (children.get(row.id) ?? []).sort(oldest)) walk(into, c, depth + 1, scope, schedule);
  };
  const hide = (row) => {
    if (placed.has(row.id)) return;
    placed.add(row.id);
    for (const c of children.get(row.id) ?? []) hide(c);
  };
  const listed = new Map(data.schedules.map((s) => [s.id, s]));
  const fires = /* @__PURE__ */ new Map();
  for (const row of roots) {
    const p = items2.get(row.id).parent_session_id;
    if (!p?.startsWith(SCHEDULE_PARENT)) continue;
    const id = p.slice(SCHEDULE_PARENT.length);
    fires.set(id, [...fires.get(id) ?? [], row]);
  }
  const under = /* @__PURE__ */ new Map();
  const after = /* @__PURE__ */ new Map();
  for (const [id, group] of fires) {
    const sched = listed.get(id);
    const shown = group.sort(newest).slice(0, SCHEDULE_RUNS_SHOWN);
    const minutes = shown.map((r) => fireTime(r.started, now));
    const seconds2 = new Set(minutes).size < minutes.length;
    for (const r of group) r.title = `fired ${fireTime(r.started, now, seconds2)} \xB7 ${sched?.name || id}`;
    const hidden = group.slice(SCHEDULE_RUNS_SHOWN);
    for (const r of hidden) hide(r);
    const n = Math.max(hidden.length, (sched?.fires ?? 0) - shown.length);
    const more = hidden.length ? {
      id,
      kind: "more",
      title: sched ? `\u2026 ${n} earlier run${n === 1 ? "" : "s"}` : `\u2026 ${n} earlier run${n === 1 ? "" : "s"} of ${id}`,
      status: "",
      scope: "folder",
      depth: sched ? 1 : 0,
      open: false,
      uiUrl: sched?.ui_url,
      ...sched && { schedule: id }
    } : void 0;
    if (!sched) {
      if (more) after.set(shown[shown.length - 1].id, more);
      continue;
    }
    const rows = [];
    for (const r of shown) walk(rows, r, 1, "folder", id);
    if (more) rows.push(more);
    under.set(id, rows);
  }
  const out = [];
  for (const scope of ["session", "folder"]) {
    for (const r of roots.filter((r2) => r2.scope === scope).sort(newest)) {
      walk(out, r, 0, scope);
      const more = after.get(r.id);
      if (more) out.push(more);
    }
  }
  for (const r of runs) walk(out, r, 0, r.scope);
  for (const s of data.schedules) {
    out.push({
      id: s.id,
      kind: "schedule",
      title: s.name || s.note || s.id,
      // The agent's column says when it fires.
      agent: s.spec,
      spec: s.spec,
      fires: s.fires,
      status: s.paused ? "paused" : "active",
      next: s.paused ? void 0 : time(s.next_fires?.[0]),
      since: s.paused ? time(s.paused_since) : void 0,
      scope: "folder",
      depth: 0,
      open: true,
      uiUrl: s.ui_url
    });
  }
  return out.flatMap((r) => r.kind === "schedule" ? [r, ...under.get(r.id) ?? []] : [r]);
}
function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1e3));
  const pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor(s % 3600 / 60))}m`;
  return `${Math.floor(s / 86400)}d${pad(Math.floor(s % 86400 / 3600))}h`;
}
function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1e3));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
function rowTime(row, now) {
  if (row.kind === "schedule") {
    if (row.status === "paused") return row.since !== void 0 ? `${age(now - row.since)} ago` : "-";
    return row.next !== void 0 ? `in ${duration(row.next - now)}` : "-";
  }
  if (row.kind === "more") return "";
  if (row.started === void 0) return "-";
  if (row.ended !== void 0) return `${age(now - row.ended)} ago`;
  if (working(row.status)) return `for ${duration(now - row.started)}`;
  return `started ${age(now - row.started)} ago`;
}
function working(status) {
  return status === "running" || status === "queued";
}
var ICONS = {
  running: ["accent", "\u25CF"],
  queued: ["muted", "\u25CB"],
  waiting_for_input: ["muted", "\u25CC"],
  completed: ["success", "\u2713"],
  failed: ["error", "\u2717"],
  timed_out: ["error", "\u2717"],
  terminated: ["error", "\u2717"],
  cancelled: ["warning", "\u2298"],
  active: ["accent", "\u21BB"],
  paused: ["muted", "\u21BB"]
};
function icon(status, paint) {
  const [color, glyph] = ICONS[status] ?? ["muted", "\xB7"];
  return paint.fg(color, glyph);
}
function stateLabel(status) {
  return status === "waiting_for_input" ? "waiting" : status;
}
function shortId(id) {
  return id.length > 13 ? `\u2026${id.slice(-12)}` : id;
}
function fit(c, text2, width = c.width, pad = false) {
  return c.kit.truncateToWidth(text2, Math.max(0, width), "\u2026", pad);
}
function titleBar(c, title) {
  const head = `\u2500 ${title} `;
  const w = c.kit.visibleWidth(head);
  if (w >= c.width) return c.paint.fg("borderAccent", c.kit.truncateToWidth(head, c.width, "\u2026"));
  return c.paint.fg("borderAccent", "\u2500 ") + c.paint.bold(c.paint.fg("accent", title)) + " " + c.paint.fg("borderAccent", "\u2500".repeat(c.width - w));
}
var WIDE = 100;
function rowLine(c, row, selected) {
  const wide = c.width >= WIDE;
  const cell = (text3, w, right2 = false) => {
    const cut2 = c.kit.truncateToWidth(text3, w, "\u2026");
    const padding = " ".repeat(Math.max(0, w - c.kit.visibleWidth(cut2)));
    return right2 ? padding + cut2 : cut2 + padding;
  };
  const more = row.kind === "more";
  const cells = wide ? [cell(more ? "" : row.kind, 10), cell(row.agent ?? "", 12), cell(stateLabel(row.status), 10), cell(rowTime(row, c.now), 15, true), cell(more ? "" : shortId(row.id), 13)] : [cell(row.agent ?? "", 10), cell(stateLabel(row.status), 9), cell(rowTime(row, c.now), 15, true)];
  const right = cells.join("  ");
  const lead = selected ? "\u25B8 " : "  ";
  const indent = "  ".repeat(row.depth);
  const titleWidth = c.width - 2 - 2 - c.kit.visibleWidth(right) - 2;
  const text2 = row.kind === "schedule" && row.status === "paused" ? `${row.title} \xB7 to resume: subagents schedule resume ${row.id}` : row.title;
  const title = fit(c, indent + (more ? c.paint.fg("dim", text2) : text2), titleWidth, true);
  const line = `${lead}${icon(row.status, c.paint)} ${selected ? c.paint.bold(title) : title}  ${c.paint.fg("muted", right)}`;
  const shade = selected && c.paint.bg;
  const cut = fit(c, line, c.width, !!shade);
  return shade ? c.paint.bg("selectedBg", cut) : cut;
}
function heading(c, text2) {
  return fit(c, c.paint.fg("muted", c.paint.bold(` ${text2}`)));
}
var SECTIONS = [
  { title: "This session", of: (r) => r.kind !== "schedule" && r.schedule === void 0 && r.scope === "session" },
  { title: "This folder (other sessions, schedules' runs)", of: (r) => r.kind !== "schedule" && r.schedule === void 0 && r.scope === "folder" },
  { title: "Schedules of this folder", of: (r) => r.kind === "schedule" || r.schedule !== void 0 }
];
var LIST_KEYS = ["\u2191\u2193 select \xB7 enter open \xB7 s send \xB7 c cancel \xB7 t take result \xB7 u UI page \xB7 r refresh \xB7 esc close", "\u2191\u2193 \xB7 enter open \xB7 s send \xB7 c cancel \xB7 t take \xB7 u UI \xB7 r refresh \xB7 esc close"];
var DETAIL_KEYS = ["\u2191\u2193 task \xB7 s send \xB7 c cancel \xB7 t take result \xB7 u UI page \xB7 r refresh \xB7 esc back", "\u2191\u2193 task \xB7 s send \xB7 c cancel \xB7 t take \xB7 u UI \xB7 r refresh \xB7 esc back"];
function scrollTo(selected, offset, maxRows, total) {
  let o = Math.min(offset, Math.max(0, total - maxRows));
  if (selected < o) o = selected;
  if (selected >= o + maxRows) o = selected - maxRows + 1;
  return Math.max(0, o);
}
function renderList(c, s) {
  const out = [titleBar(c, `Subagents \xB7 this session and ${s.folder}`)];
  if (s.loading) out.push(fit(c, c.paint.fg("muted", "  Asking the subagents service\u2026")));
  else if (s.rows.length === 0) out.push(fit(c, c.paint.fg("muted", "  Nothing delegated from this session or this folder yet.")));
  const offset = scrollTo(s.selected, s.offset, s.maxRows, s.rows.length);
  const end = Math.min(s.rows.length, offset + s.maxRows);
  if (offset > 0) out.push(fit(c, c.paint.fg("dim", `  \u2191 ${offset} more`)));
  let section = "";
  for (let i = offset; i < end; i++) {
    const row = s.rows[i];
    const sec = SECTIONS.find((x) => x.of(row)).title;
    if (sec !== section) {
      out.push(heading(c, sec));
      section = sec;
    }
    out.push(rowLine(c, row, i === s.selected));
  }
  if (end < s.rows.length) out.push(fit(c, c.paint.fg("dim", `  \u2193 ${s.rows.length - end} more`)));
  return [...out, ...foot(c, s.problems ?? [], s.notice, s.prompt, LIST_KEYS)];
}
var NOTICE_LINES = 3;
function noticeLines(c, problems, notice) {
  const out = [];
  const wrap = (text2, color) => c.kit.wrapTextWithAnsi(text2, c.width - 1).slice(0, NOTICE_LINES).map((l) => fit(c, c.paint.fg(color, ` ${l}`)));
  if (problems.length) out.push(...wrap(problems.join("; "), "error"));
  if (notice) out.push(...wrap(notice.text, notice.level === "error" ? "error" : "accent"));
  return out;
}
function foot(c, problems, notice, prompt, keys) {
  const out = noticeLines(c, problems, notice);
  const [full, short] = keys;
  const help = c.kit.visibleWidth(full) < c.width ? full : short;
  out.push(prompt !== void 0 ? fit(c, prompt) : fit(c, c.paint.fg("dim", ` ${help}`)));
  return out;
}
var DETAIL_TOOL_ROWS = 4;
var LINE_CHARS = 200;
var TRANSCRIPT_MIN_LINES = 6;
var PLAN_SHARE = 3;
function itemStatus(it) {
  if (!it.done) return it.status;
  if (succeeded(it)) return "completed";
  if (cancelled(it)) return "cancelled";
  return it.status === "completed" ? "failed" : it.status;
}
function taskBlock(c, it, marked) {
  const block = [];
  const name = it.name || it.description || it.task_id;
  const st = itemStatus(it);
  block.push(` ${marked ? "\u25B8" : " "} ${icon(st, c.paint)} ${c.paint.bold(name)} \xB7 ${it.agent} \xB7 ${stateLabel(st)} \xB7 ${duration(it.elapsed_ms)} \xB7 ${it.tool_count} tools \xB7 ${it.task_id}`);
  for (const r of (it.tool_rows ?? []).slice(-DETAIL_TOOL_ROWS)) block.push(c.paint.fg("muted", `     ${toolRowText(r)}`));
  if (!it.done && it.question) block.push(c.paint.fg("warning", `     ? asks (${it.question.reason}): ${oneLine(it.question.message, LINE_CHARS)}`));
  else if (!it.done && it.last_text) block.push(`     \xBB ${oneLine(it.last_text, LINE_CHARS)}`);
  else if (it.done && it.error) block.push(c.paint.fg("error", `     ${oneLine(it.error.message, LINE_CHARS)}`));
  else if (it.done && it.output) block.push(`     ${oneLine(it.output, LINE_CHARS)}`);
  for (const n of it.nested ?? []) block.push(c.paint.fg("muted", `     \u21B3 ${icon(n.status || n.execution_status, c.paint)} ${n.name || n.id} \xB7 ${n.agent ?? ""} \xB7 ${n.status || n.execution_status}`));
  return block;
}
function taskWindow(heights, selected, offset, room) {
  const n = heights.length;
  const total = heights.reduce((a, b) => a + b, 0);
  if (total <= room) return { start: 0, end: n };
  const avail = Math.max(1, room - 2);
  const sum = (a, b) => heights.slice(a, b).reduce((x, y) => x + y, 0);
  let start = Math.max(0, Math.min(offset, selected));
  while (start < selected && sum(start, selected + 1) > avail) start++;
  let end = selected + 1;
  if (sum(start, end) > avail) return { start: selected, end };
  while (end < n && sum(start, end + 1) <= avail) end++;
  while (start > 0 && sum(start - 1, end) <= avail) start--;
  return { start, end };
}
function detailView(c, s) {
  const row = s.row;
  const out = [titleBar(c, `Subagents \u203A ${row.title.startsWith(row.kind) ? row.title : `${row.kind} ${row.title}`}`)];
  const env = s.env;
  const status = env?.status || row.status;
  out.push(fit(c, ` ${icon(status, c.paint)} ${c.paint.bold(row.title)} \xB7 ${stateLabel(status)} \xB7 ${rowTime({ ...row, status }, c.now)} \xB7 ${row.id}`));
  if (s.error) out.push(fit(c, c.paint.fg("error", `   ${s.error}`)));
  if (!env) {
    if (!s.error) out.push(fit(c, c.paint.fg("muted", "   Asking the subagents service\u2026")));
    return { lines: [...out, ...foot(c, [], s.notice, s.prompt, DETAIL_KEYS)], offset: 0 };
  }
  const planLines = [];
  if (env.plan) {
    const plan = env.plan;
    const done = plan.steps.filter((st) => st.state === "completed").length;
    planLines.push(c.paint.fg("muted", `   Plan ${plan.name ?? ""} \xB7 ${done}/${plan.steps.length} steps done${plan.attempt > 1 ? ` \xB7 attempt ${plan.attempt}` : ""}`));
    for (const st of plan.steps) {
      const bits = [st.agent ?? "", st.state, (st.round ?? 0) > 1 ? `round ${st.round}` : "", st.verdict ? `verdict ${st.verdict}` : ""].filter(Boolean);
      planLines.push(`   ${icon(st.state, c.paint)} ${[...st.path ?? [], st.key].join("/")} \xB7 ${bits.join(" \xB7 ")}`);
    }
    if (plan.stopped) planLines.push(c.paint.fg("error", `   \u2715 ${plan.stopped.code}: ${plan.stopped.message}`));
  }
  const list = env.items ?? [];
  const selected = Math.max(0, Math.min(s.task, list.length - 1));
  const blocks = list.map((it, i) => taskBlock(c, it, list.length > 1 && i === selected));
  const url = (list[selected] ?? list[0])?.ui_url || env.ui_url || row.uiUrl;
  const tail = [];
  const chosen = list[selected];
  if (chosen) {
    tail.push(c.paint.fg("muted", c.paint.bold(` Transcript of ${chosen.name || chosen.task_id} (its end)`)));
    const text2 = s.transcript?.trimEnd();
    const lines = text2 ? text2.split("\n").filter((l) => l.trim() !== "") : [c.paint.fg("dim", "(reading\u2026)")];
    tail.push(...lines.map((l) => `   ${l}`));
  }
  const footer = foot(c, [], s.notice, s.prompt, DETAIL_KEYS);
  const fixed = out.length + (url ? 1 : 0) + footer.length;
  const room = Math.max(0, s.maxLines - fixed);
  const all = planLines.length + blocks.reduce((a, b) => a + b.length, 0);
  let body;
  let offset = 0;
  if (all + Math.min(tail.length, TRANSCRIPT_MIN_LINES) <= room) {
    body = [...planLines, ...blocks.flat()];
  } else {
    let keep = Math.min(tail.length, TRANSCRIPT_MIN_LINES, Math.max(0, room - 3));
    if (keep < 2) keep = 0;
    const bodyRoom = room - keep;
    const planCap = planLines.length ? Math.max(1, Math.floor(bodyRoom / PLAN_SHARE)) : 0;
    const plan = planLines.length <= planCap ? planLines : planCap >= 2 ? [...planLines.slice(0, planCap - 1), c.paint.fg("dim", `   \u2026 ${planLines.length - planCap + 1} more lines of the plan`)] : planLines.slice(0, 1);
    const taskRoom = Math.max(0, bodyRoom - plan.length);
    const w = taskWindow(
      blocks.map((b) => b.length),
      selected,
      s.offset ?? 0,
      taskRoom
    );
    offset = w.start;
    const shown = blocks.slice(w.start, w.end).flat();
    const more = (n, arrow) => c.paint.fg("dim", `  ${arrow} ${n} more task${n === 1 ? "" : "s"}`);
    const above = w.start > 0 ? [more(w.start, "\u2191")] : [];
    const below = w.end < blocks.length ? [more(blocks.length - w.end, "\u2193")] : [];
    body = [...plan, ...above, ...shown.slice(0, Math.max(1, taskRoom - above.length - below.length)), ...below];
  }
  const tailRoom = Math.max(0, room - body.length);
  const shownTail = tail.length && tailRoom >= 2 ? [tail[0], ...tail.slice(1).slice(-(tailRoom - 1))] : [];
  for (const l of [...body.slice(0, room), ...shownTail]) out.push(fit(c, l));
  if (url) out.push(fit(c, c.paint.fg("dim", ` UI ${url}`)));
  return { lines: [...out, ...footer], offset };
}
var SCHEDULE_KEYS = ["u UI page \xB7 r refresh \xB7 esc back", "u UI \xB7 r refresh \xB7 esc back"];
var NEXT_FIRES = 3;
function renderSchedule(c, s) {
  const row = s.row;
  const it = s.item;
  const out = [titleBar(c, `Subagents \u203A schedule ${row.title}`)];
  const status = it ? it.paused ? "paused" : "active" : row.status;
  const spec = it?.spec ?? row.spec;
  out.push(fit(c, ` ${icon(status, c.paint)} ${c.paint.bold(row.title)} \xB7 ${status}${spec ? ` \xB7 ${spec}` : ""} \xB7 ${row.id}`));
  if (s.error) out.push(fit(c, c.paint.fg("error", `   ${s.error}`)));
  const footer = foot(c, [], s.notice, void 0, SCHEDULE_KEYS);
  if (!it) {
    if (!s.error) out.push(fit(c, c.paint.fg("muted", "   Asking the subagents service\u2026")));
    return [...out, ...footer];
  }
  const facts = [];
  const policies = [`overlap ${it.overlap ?? "skip"}`, `catch-up ${it.catchup ?? "-"}`, it.quiet ? "quiet (only failures are delivered)" : "", it.end ? `ends ${it.end}` : ""].filter(Boolean);
  facts.push(`   Runs a ${it.kind ?? "delegation"} \xB7 ${policies.join(" \xB7 ")}${it.timezone ? ` \xB7 times in ${it.timezone}` : ""}${it.cwd ? ` \xB7 in ${it.cwd}` : ""}`);
  const since = it.paused ? time(it.paused_since) : void 0;
  if (it.note) facts.push(c.paint.fg("muted", `   ${it.paused ? `Paused${since !== void 0 ? ` ${age(c.now - since)} ago` : ""}: ` : "Note: "}${oneLine(it.note, LINE_CHARS)}`));
  const fired = [`Fired ${it.fires ?? 0} time${it.fires === 1 ? "" : "s"}`, it.missed ? `${it.missed} missed` : "", it.skipped ? `${it.skipped} skipped by overlap` : ""].filter(Boolean).join(", ");
  const next = (it.next_fires ?? []).slice(0, NEXT_FIRES).map((t) => time(t)).filter((t) => t !== void 0).map((t) => `in ${duration(t - c.now)}`);
  facts.push(`   ${fired} \xB7 ${it.paused ? `paused: no next fire until \`subagents schedule resume ${it.id}\` (or ask pi to resume it)` : next.length ? `next ${next.join(", ")}` : "no next fire"}`);
  const runs = it.runs ?? [];
  const runLines = runs.map((r) => {
    const when = time(r.fired);
    const ago = when !== void 0 ? `${age(c.now - when)} ago` : "-";
    const delivered = r.delivered ? " \xB7 delivered" : r.result_id ? " \xB7 waits for a pi session here" : "";
    const said = r.error ? r.error.message : r.summary;
    return `   ${icon(r.status, c.paint)} ${ago} \xB7 ${stateLabel(r.status)}${delivered}${said ? ` \xB7 ${oneLine(said, LINE_CHARS)}` : ""}${r.delegation_id ? ` \xB7 ${shortId(r.delegation_id)}` : ""}`;
  });
  const heading2 = c.paint.fg("muted", c.paint.bold(runs.length ? " Recent runs (newest first)" : " No runs yet"));
  const fixed = out.length + (it.ui_url ? 1 : 0) + footer.length;
  const room = Math.max(0, s.maxLines - fixed);
  const body = [...facts, heading2];
  const runRoom = Math.max(0, room - body.length);
  const shownRuns = runLines.length <= runRoom ? runLines : [...runLines.slice(0, Math.max(0, runRoom - 1)), c.paint.fg("dim", `  \u2193 ${runLines.length - Math.max(0, runRoom - 1)} more runs`)];
  for (const l of [...body, ...shownRuns].slice(0, room)) out.push(fit(c, l));
  if (it.ui_url) out.push(fit(c, c.paint.fg("dim", ` UI ${it.ui_url}`)));
  return [...out, ...footer];
}
function renderWidget(c, running) {
  if (running.length === 0) return [];
  const p = c.paint;
  const list = [...running].sort((a, b) => a.started - b.started);
  const head = `${p.fg("accent", "\u25CF")} ${p.bold(`${list.length} subagent${list.length === 1 ? "" : "s"} running`)}`;
  const tasks = list.map((t) => `${p.fg("accent", t.agent || "default")}${t.name && t.name !== t.agent ? ` ${t.name}` : ""} ${p.fg("muted", duration(c.now - t.started))}`);
  const hint = p.fg("dim", "/subagents");
  const sep = p.fg("dim", " \xB7 ");
  let shown = tasks.length;
  const line = (n) => [head, ...tasks.slice(0, n), ...n < tasks.length ? [p.fg("muted", `+${tasks.length - n} more`)] : [], hint].join(sep);
  while (shown > 1 && c.kit.visibleWidth(line(shown)) > c.width) shown--;
  return [fit(c, line(shown))];
}
function transcriptTail(text2, n) {
  return text2.split("\n").filter((l) => l.trim() !== "").slice(-n).join("\n");
}

// src/fleet-ui.ts
var TICK_MS = 1e3;
var LIST_REFRESH_MS = 3e3;
var DETAIL_REFRESH_MS = 2e3;
var TRANSCRIPT_REFRESH_MS = 5e3;
var TRANSCRIPT_LINES = 40;
var MARGIN_ROWS = 6;
function defaultEvery(ms, fn) {
  const t = setInterval(fn, ms);
  t.unref?.();
  return () => clearInterval(t);
}
var FleetView = class {
  o;
  rows = [];
  selected = 0;
  offset = 0;
  loading = true;
  /** What the last action said: until the next action, or the screen changes. */
  notice;
  /** The parts of the list that could not be read at the last ask: until they can. */
  problems = [];
  pending;
  detail;
  sched;
  listAt = 0;
  asking = false;
  closed = false;
  stop;
  focusedState = false;
  constructor(o) {
    this.o = o;
    this.stop = (o.every ?? defaultEvery)(TICK_MS, () => this.tick());
    void this.refreshList();
  }
  now() {
    return this.o.now?.() ?? Date.now();
  }
  /** Focusable: the message input shows the terminal's cursor while the view has focus. */
  get focused() {
    return this.focusedState;
  }
  set focused(v) {
    this.focusedState = v;
    if (this.pending?.kind === "send") this.pending.input.focused = v;
  }
  canvas(width) {
    return { kit: this.o.kit, paint: this.o.paint, width, now: this.now() };
  }
  maxLines() {
    return Math.max(8, this.o.rows() - MARGIN_ROWS);
  }
  render(width) {
    const c = this.canvas(width);
    const prompt = this.promptLine(width);
    if (this.sched) return renderSchedule(c, { ...this.sched, maxLines: this.maxLines(), notice: this.notice });
    if (this.detail) {
      const d = detailView(c, { ...this.detail, maxLines: this.maxLines(), notice: this.notice, prompt });
      this.detail.offset = d.offset;
      return d.lines;
    }
    const maxRows = Math.max(3, this.maxLines() - 7 - noticeLines(c, this.problems, this.notice).length);
    this.offset = scrollTo(this.selected, this.offset, maxRows, this.rows.length);
    return renderList(c, {
      rows: this.rows,
      selected: this.selected,
      maxRows,
      offset: this.offset,
      loading: this.loading,
      notice: this.notice,
      problems: this.problems,
      prompt,
      folder: this.o.folder
    });
  }
  promptLine(width) {
    const p = this.pending;
    if (!p) return void 0;
    if (p.kind === "send") return ` ${p.input.render(Math.max(10, width - 1))[0] ?? ""}`;
    return ` ${this.o.paint.fg("warning", `Cancel ${p.name}? y to cancel it, any other key to keep it`)}`;
  }
  invalidate() {
  }
  dispose() {
    this.closed = true;
    this.stop();
  }
  redraw() {
    if (!this.closed) this.o.requestRender();
  }
  say(text2, level = "info") {
    this.notice = { text: text2, level };
    this.redraw();
  }
  /** The clock's beat: redraws while something runs, and asks the service again when it is time. */
  tick() {
    if (this.closed) return;
    const now = this.now();
    const sc = this.sched;
    if (sc) {
      this.redraw();
      const live = (sc.item?.runs ?? []).some((r) => working(r.status));
      if (live && !this.asking && now - sc.askedAt >= DETAIL_REFRESH_MS) void this.refreshSchedule();
      return;
    }
    const d = this.detail;
    if (d) {
      const live = !d.env || !d.env.done;
      if (live) this.redraw();
      if (live && !this.asking && now - d.statusAt >= DETAIL_REFRESH_MS) void this.refreshDetail();
      return;
    }
    if (!this.rows.some((r) => working(r.status))) return;
    this.redraw();
    if (!this.asking && now - this.listAt >= LIST_REFRESH_MS) void this.refreshList();
  }
  async refreshList() {
    this.asking = true;
    this.listAt = this.now();
    try {
      const { data, problems } = await this.o.source.list();
      const keep = this.rows[this.selected];
      this.rows = fleetRows(data, this.now());
      const at = keep ? this.rows.findIndex((r) => r.id === keep.id && r.kind === keep.kind) : -1;
      this.selected = at >= 0 ? at : Math.min(this.selected, Math.max(0, this.rows.length - 1));
      this.problems = problems;
    } catch (e) {
      this.problems = [e.message];
    } finally {
      this.loading = false;
      this.asking = false;
      this.redraw();
    }
  }
  async refreshDetail() {
    const d = this.detail;
    if (!d) return;
    this.asking = true;
    d.statusAt = this.now();
    try {
      const env = await this.o.source.status(d.row.id);
      if (this.detail !== d) return;
      d.env = env;
      d.error = void 0;
      d.task = Math.min(d.task, Math.max(0, (env.items ?? []).length - 1));
      await this.readTranscript(d);
    } catch (e) {
      if (this.detail === d) d.error = e.message;
    } finally {
      this.asking = false;
      this.redraw();
    }
  }
  /** Reads the selected task's transcript when the task moved on since the last read, at most every TRANSCRIPT_REFRESH_MS. */
  async readTranscript(d, force = false) {
    const it = d.env?.items?.[d.task];
    if (!it) return;
    const mark = `${it.task_id}:${it.turn ?? 0}:${it.tool_count}:${it.event_count ?? 0}:${it.done}`;
    if (!force && mark === d.mark) return;
    if (!force && d.transcript !== void 0 && this.now() - d.readAt < TRANSCRIPT_REFRESH_MS) return;
    d.mark = mark;
    d.readAt = this.now();
    try {
      const text2 = await this.o.source.transcript(it.task_id);
      if (this.detail === d) d.transcript = transcriptTail(text2, TRANSCRIPT_LINES);
    } catch (e) {
      if (this.detail === d) d.transcript = `(${e.message})`;
    }
  }
  async refreshSchedule() {
    const sc = this.sched;
    if (!sc) return;
    this.asking = true;
    sc.askedAt = this.now();
    try {
      const item = await this.o.source.schedule(sc.row.id);
      if (this.sched !== sc) return;
      sc.item = item;
      sc.error = item ? void 0 : `Schedule ${sc.row.id} is gone (deleted)`;
    } catch (e) {
      if (this.sched === sc) sc.error = e.message;
    } finally {
      this.asking = false;
      this.redraw();
    }
  }
  open(row) {
    this.notice = void 0;
    if (row.kind === "more") {
      const sched = this.rows.find((r) => r.kind === "schedule" && r.id === row.schedule);
      if (sched) return this.open(sched);
      this.say(`Its schedule ${row.id} is deleted: \`subagents list --cwd .\` in this folder lists its runs`, "error");
      return;
    }
    if (row.kind === "schedule") {
      this.sched = { row, askedAt: 0 };
      this.redraw();
      void this.refreshSchedule();
      return;
    }
    this.detail = { row, task: 0, offset: 0, readAt: 0, statusAt: 0, mark: "" };
    this.redraw();
    void this.refreshDetail();
  }
  back() {
    this.detail = void 0;
    this.sched = void 0;
    this.notice = void 0;
    this.redraw();
    void this.refreshList();
  }
  /** A key typed as text: plain, or in the Kitty protocol's form. */
  letter(data) {
    if (data.length === 1) return data;
    return this.o.kit.decodeKittyPrintable?.(data);
  }
  handleInput(data) {
    const p = this.pending;
    if (p?.kind === "send") {
      p.input.handleInput(data);
      this.redraw();
      return;
    }
    if (p?.kind === "cancel") {
      this.pending = void 0;
      if (this.letter(data) === "y") void this.act(() => this.o.source.cancel(p.id), true);
      else this.say(`${p.name} keeps running`);
      return;
    }
    const k = this.o.keys;
    if (this.sched) return this.scheduleInput(data);
    const d = this.detail;
    const count = d ? (d.env?.items ?? []).length : this.rows.length;
    const move = (to) => {
      if (count === 0) return;
      const next = Math.max(0, Math.min(count - 1, to));
      if (d) {
        if (next !== d.task) {
          d.task = next;
          d.transcript = void 0;
          void this.readTranscript(d, true).then(() => this.redraw());
        }
      } else this.selected = next;
      this.redraw();
    };
    const current = d ? d.task : this.selected;
    const page = Math.max(1, this.maxLines() - 10);
    if (k.matches(data, "tui.select.up")) return move(current - 1);
    if (k.matches(data, "tui.select.down")) return move(current + 1);
    if (k.matches(data, "tui.select.pageUp")) return move(current - page);
    if (k.matches(data, "tui.select.pageDown")) return move(current + page);
    if (k.matches(data, "tui.select.cancel")) {
      if (d) this.back();
      else this.o.close();
      return;
    }
    if (k.matches(data, "tui.select.confirm")) {
      const row = this.rows[this.selected];
      if (!d && row) this.open(row);
      return;
    }
    switch (this.letter(data)) {
      // vi's keys, as pi-subagents' inspector has them.
      case "k":
        return move(current - 1);
      case "j":
        return move(current + 1);
      case "q":
        if (d) this.back();
        else this.o.close();
        return;
      case "s":
        return this.startSend();
      case "c":
        return this.startCancel();
      case "t":
        return this.take();
      case "u":
        return this.openPage();
      case "r":
        if (d) d.mark = "";
        return this.ask(() => d ? this.refreshDetail() : this.refreshList());
    }
  }
  /** A key on an open schedule: back, ask again, its UI page; it has no message, result or cancel of its own. */
  scheduleInput(data) {
    const sc = this.sched;
    const k = this.o.keys;
    const key = this.letter(data);
    if (k.matches(data, "tui.select.cancel") || key === "q") return this.back();
    switch (key) {
      case "r":
        return this.ask(() => this.refreshSchedule());
      case "u":
        return this.openPage();
      case "s":
      case "t":
      case "c":
        return this.say(scheduleRefusal(sc.row, key), "error");
    }
  }
  /** Asks again now, saying so until the answer is on the screen. */
  ask(refresh) {
    const asking2 = { text: "Asking again\u2026", level: "info" };
    this.notice = asking2;
    this.redraw();
    void refresh().then(() => {
      if (this.notice === asking2) this.notice = void 0;
      this.redraw();
    });
  }
  /** The session a message, a take or a page goes to: the selected task, else the selected row's session. */
  target() {
    const sc = this.sched;
    if (sc) return { name: sc.row.title, url: sc.item?.ui_url || sc.row.uiUrl, schedule: sc.row };
    const d = this.detail;
    if (d) {
      const it = d.env?.items?.[d.task];
      if (!it) return { name: d.row.title, url: d.env?.ui_url || d.row.uiUrl };
      return { session: it.task_id, name: it.name || it.description || it.task_id, url: it.ui_url || d.env?.ui_url };
    }
    const row = this.rows[this.selected];
    if (!row) return void 0;
    return { session: row.session, name: row.title, url: row.uiUrl, schedule: row.kind === "schedule" || row.kind === "more" ? row : void 0 };
  }
  startSend() {
    const t = this.target();
    if (!t) return;
    if (t.schedule) {
      this.say(scheduleRefusal(t.schedule, "s"), "error");
      return;
    }
    if (!t.session) {
      this.say(`${t.name} has several tasks: open it (enter) and choose the task to send to`, "error");
      return;
    }
    const input = new this.o.kit.Input({ prompt: `Message to ${t.name}: ` });
    input.focused = this.focusedState;
    const session = t.session;
    input.onSubmit = (value) => {
      this.pending = void 0;
      if (!value.trim()) {
        this.say("Nothing sent");
        return;
      }
      void this.act(() => this.o.source.send(session, value), true);
    };
    input.onEscape = () => {
      this.pending = void 0;
      this.say("Nothing sent");
    };
    this.pending = { kind: "send", session, name: t.name, input };
    this.notice = { text: "enter sends, esc drops the message", level: "info" };
    this.redraw();
  }
  startCancel() {
    const d = this.detail;
    let id;
    let name;
    if (d) {
      const list = d.env?.items ?? [];
      const one = d.row.kind !== "plan" && list.length > 1 ? list[d.task] : void 0;
      id = one ? one.task_id : d.row.id;
      name = one ? one.name || one.task_id : d.row.title;
    } else {
      const row = this.rows[this.selected];
      if (!row) return;
      if (row.kind === "schedule" || row.kind === "more") {
        this.say(scheduleRefusal(row, "c"), "error");
        return;
      }
      id = row.id;
      name = row.title;
    }
    this.pending = { kind: "cancel", id, name };
    this.notice = void 0;
    this.redraw();
  }
  take() {
    const t = this.target();
    if (!t) return;
    if (t.schedule) {
      this.say(scheduleRefusal(t.schedule, "t"), "error");
      return;
    }
    if (!t.session) {
      this.say(`${t.name} has several tasks: open it (enter) and choose the task whose result to take`, "error");
      return;
    }
    const session = t.session;
    void this.act(() => this.o.source.take(session, t.name), false);
  }
  openPage() {
    const t = this.target();
    if (!t?.url) {
      this.say("No Temporal UI page is known for it (the service's UI is off?)", "error");
      return;
    }
    const url = t.url;
    void this.act(() => this.o.source.open(url), false);
  }
  /** Runs an action, says how it went, and with refresh asks for the new state. */
  async act(run, refresh) {
    this.say("\u2026");
    try {
      this.say(await run());
    } catch (e) {
      this.say(e.message, "error");
    }
    if (!refresh || this.closed) return;
    if (this.detail) {
      this.detail.mark = "";
      await this.refreshDetail();
    } else await this.refreshList();
  }
};
function scheduleRefusal(row, key) {
  if (row.kind === "more") {
    const act = key === "s" ? "send to" : key === "t" ? "take the result of" : "cancel";
    return `The earlier runs of schedule ${row.id} are not listed here: ${act} one of the runs listed above it, or one by its ID with \`subagents\`; enter on this row shows the schedule's recent runs`;
  }
  if (key === "c" && row.status === "paused") return `${row.id} is a paused schedule: it fires again once resumed (\`subagents schedule resume ${row.id}\`), or goes with \`subagents schedule delete ${row.id}\`; a run of it, listed beneath it, is cancelled`;
  if (key === "c") return `${row.title} is a schedule: it is paused or deleted, not cancelled (\`subagents schedule pause ${row.id}\`); a run of it, listed beneath it, is cancelled`;
  const what = key === "s" ? "takes no message" : "has no result of its own";
  return `${row.title} is a schedule: it ${what}; its latest runs are listed beneath it, and enter on it shows them (\`subagents schedule describe ${row.id}\`)`;
}

// src/fleet-widget.ts
var TICK_MS2 = 1e3;
var POLL_MS = 2e3;
function defaultEvery2(ms, fn) {
  const t = setInterval(fn, ms);
  t.unref?.();
  return () => clearInterval(t);
}
function ourProgress(details) {
  if (!details || typeof details !== "object") return false;
  const d = details;
  return "envelope" in d || "windows" in d || d.contract_version === "task.v1";
}
function ourResult(details) {
  if (ourProgress(details)) return true;
  if (!details || typeof details !== "object") return false;
  const d = details;
  return d.mode === "single" && typeof d.sessionId === "string";
}
var FleetWidget = class {
  o;
  tasks = [];
  /** Tool calls of ours under way (by toolCallId). */
  calls = /* @__PURE__ */ new Set();
  stopTick;
  polledAt = 0;
  polling = false;
  up = false;
  redraw;
  closed = false;
  constructor(o) {
    this.o = o;
  }
  now() {
    return this.o.now?.() ?? Date.now();
  }
  /** A tool call of ours sent live progress: something runs. */
  callRunning(toolCallId) {
    if (this.calls.has(toolCallId)) return;
    this.calls.add(toolCallId);
    this.kick(true);
  }
  /** A tool call ended: what it ran has ended, or goes on in the background. */
  callEnded(toolCallId) {
    if (this.calls.delete(toolCallId)) this.kick(true);
  }
  /**
   * Something may have started or ended (a turn ended, a view closed):
   * look, and keep looking while anything runs; unless this session
   * started nothing and waits for nothing (cheap checks first).
   */
  kick(now = false) {
    if (this.closed) return;
    if (!this.busy() && !this.o.started()) return;
    if (now) this.polledAt = 0;
    if (!this.stopTick) this.stopTick = (this.o.every ?? defaultEvery2)(TICK_MS2, () => this.tick());
    this.tick();
  }
  busy() {
    return this.calls.size > 0 || this.o.waiting() || this.tasks.length > 0;
  }
  /** The clock's beat: redraw the times, ask again when it is time, stop when nothing runs. */
  tick() {
    if (this.closed) return;
    if (this.up) this.redraw?.();
    if (!this.polling && this.now() - this.polledAt >= POLL_MS) void this.poll();
  }
  async poll() {
    this.polling = true;
    this.polledAt = this.now();
    try {
      this.tasks = await this.o.source.running();
    } catch {
      this.tasks = [];
    } finally {
      this.polling = false;
    }
    if (this.closed) return;
    this.place();
    if (!this.busy()) {
      this.stopTick?.();
      this.stopTick = void 0;
    }
  }
  /** Puts the widget up when tasks run, takes it down when none does. */
  place() {
    if (this.tasks.length > 0 && !this.up) {
      this.up = true;
      this.o.show((requestRender) => {
        this.redraw = requestRender;
        return { render: (width, paint) => this.lines(width, paint) };
      });
    } else if (this.tasks.length === 0 && this.up) {
      this.up = false;
      this.redraw = void 0;
      this.o.show(void 0);
    } else this.redraw?.();
  }
  /** The widget's lines at width. */
  lines(width, paint) {
    return renderWidget({ kit: this.o.kit, paint, width, now: this.now() }, this.tasks);
  }
  /** The session ended: no more looks, and the widget comes down. */
  dispose() {
    this.closed = true;
    this.stopTick?.();
    this.stopTick = void 0;
    if (this.up) this.o.show(void 0);
    this.up = false;
  }
};

// src/fleet.ts
var TAKEN_MESSAGE_TYPE = "subagents-taken";
var WIDGET_KEY = "subagents-fleet";
var PI_TUI = "@earendil-works/pi-tui";
async function runsOf(call) {
  return (await call).runs ?? [];
}
async function schedulesOf2(cli, cwd) {
  try {
    const env = await cli.call("schedule", [], [], { action: "list", cwd });
    return { schedules: env.schedules ?? [] };
  } catch (e) {
    if (e instanceof SubagentsError && e.notRunning) return { schedules: [] };
    const code = e instanceof SubagentsError && e.code ? `${e.code}: ` : "";
    return { schedules: [], problem: `schedules: ${code}${e.message}` };
  }
}
async function listText(cli, parent, waiting) {
  let lines;
  try {
    const runs = (await cli.call("list", ["--parent-session", parent])).runs ?? [];
    lines = runs.length ? runs.map(listLine) : ["No delegations from this session yet."];
  } catch (e) {
    if (!(e instanceof SubagentsError && e.notRunning)) throw e;
    lines = ["The subagents service is not running: nothing runs"];
  }
  if (waiting.length) lines.push(`Waiting in the background for: ${waiting.join(", ")}`);
  return lines.join("\n");
}
function opener() {
  if (process.platform === "darwin") return ["open"];
  if (process.platform === "win32") return ["cmd", "/c", "start", ""];
  if (!process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return void 0;
  return ["xdg-open"];
}
function openUrl(url) {
  const cmd = opener();
  if (!cmd) return Promise.resolve(`Temporal UI: ${url}`);
  return new Promise((resolve2) => {
    const child = spawn4(cmd[0], [...cmd.slice(1), url], { detached: true, stdio: "ignore" });
    child.on("error", () => resolve2(`Temporal UI: ${url} (could not open it: ${cmd[0]} failed)`));
    child.on("spawn", () => {
      child.unref();
      resolve2(`Opened ${url}`);
    });
  });
}
function source(pi, deps, ctx) {
  const { cli, delivery } = deps;
  return {
    async list() {
      const problems = [];
      const passive = cli(true);
      try {
        const [mine, folder, sched] = await Promise.all([
          runsOf(passive.call("list", ["--parent-session", delivery.parent(ctx)])),
          runsOf(passive.call("list", ["--cwd", ctx.cwd])).catch((e) => {
            problems.push(`this folder's runs: ${e.message}`);
            return [];
          }),
          schedulesOf2(passive, ctx.cwd)
        ]);
        if (sched.problem) problems.push(sched.problem);
        const data = { mine: mine ?? [], folder: folder ?? [], schedules: sched.schedules };
        return { data, problems };
      } catch (e) {
        if (e instanceof SubagentsError && e.notRunning) {
          return { data: { mine: [], folder: [], schedules: [] }, problems: ["The subagents service is not running: nothing runs"] };
        }
        throw e;
      }
    },
    // Looking (a run's state, its transcript, a schedule, a result to
    // take) starts no service; only send and cancel may, as the tools do.
    status: (id) => cli(true).call("status", [], [id]),
    async transcript(id) {
      return (await cli(true).call("transcript", [], [id])).text ?? "";
    },
    async schedule(id) {
      const env = await cli(true).call("schedule", [], [], { action: "describe", id });
      return env.schedules?.[0];
    },
    async send(session, message) {
      const env = await delivery.own(cli().call("send", [], [], { task_id: session, prompt: message, parent_session_id: delivery.delivering(ctx), deliver: true }));
      if (env.accepted_turn) {
        delivery.watchTurn(session, env.accepted_turn, ctx);
        return `Sent: it runs as turn ${env.accepted_turn} of ${session}, after the turn under way; its answer comes back here`;
      }
      if (env.delegation_id && !env.done) delivery.watch(env.delegation_id);
      return `Sent: ${session} goes on with it${env.delegation_id ? ` (${env.delegation_id}); its result comes back here` : ""}`;
    },
    async cancel(id) {
      const env = await cli().call("cancel", [], [id]);
      const it = env.items?.[0];
      const applied = env.cancel_applied ?? it?.cancel_applied;
      const prior = env.prior_status ?? it?.prior_status;
      return applied === false ? `${id} had ended already${prior ? ` (${prior})` : ""}: nothing to cancel` : `Cancelled ${id}${prior ? ` (it was ${prior})` : ""}`;
    },
    async take(session, label) {
      const env = await cli(true).call("output", ["--full"], [session]);
      const text2 = env.text ?? "";
      if (!text2.trim()) return `${label} has no output yet`;
      pi.sendMessage(
        { customType: TAKEN_MESSAGE_TYPE, content: `Result of ${label} [${session}], taken with /subagents:

${text2}`, display: true, details: { sessionId: session } },
        // Into the conversation, for the next prompt; no turn of its own.
        { triggerTurn: false }
      );
      return `Put the result of ${label} into the conversation (${text2.length} characters)`;
    },
    open: openUrl
  };
}
function calledOurs(ctx) {
  try {
    for (const e of ctx.sessionManager.getBranch()) {
      if (e.type === "message" && e.message?.role === "toolResult" && ourResult(e.message.details)) return true;
    }
  } catch {
  }
  return false;
}
async function runningTasks(deps, ctx) {
  const env = await deps.cli(true).call("list", ["--kind", "session", "--open", "--parent-session", deps.delivery.parent(ctx)]);
  return (env.runs ?? []).filter((r) => r.status === "running" || r.status === "queued").map((r) => ({ id: r.id, agent: r.agent ?? "", name: r.name, started: Date.parse(r.started) || Date.now() }));
}
function registerFleet(pi, deps) {
  let tui;
  const loadTui = async () => tui ??= await (deps.loadTui ?? (() => import(PI_TUI)))();
  let widget;
  let calledHere = false;
  let calledBefore = false;
  pi.registerCommand("subagents", {
    description: "This session's and this folder's delegations, sessions, plans and schedules: open one, send, cancel, take a result",
    handler: async (_args, ctx) => {
      if (ctx.mode !== "tui") {
        answer(pi, ctx, "subagents", await listText(deps.cli(true), deps.delivery.parent(ctx), deps.delivery.running()));
        return;
      }
      const kit = await loadTui();
      await ctx.ui.custom((term, theme, keybindings, done) => {
        const keys = { matches: (data, action) => keybindings.matches(data, action) };
        return new FleetView({
          source: source(pi, deps, ctx),
          kit,
          paint: theme,
          keys,
          folder: basename(ctx.cwd) || ctx.cwd,
          rows: () => term.terminal.rows,
          requestRender: () => term.requestRender(),
          close: () => done(void 0)
        });
      });
      widget?.kick(true);
    }
  });
  pi.on("session_start", async (_event, ctx) => {
    widget?.dispose();
    widget = void 0;
    calledHere = false;
    calledBefore = false;
    if (ctx.mode !== "tui") return;
    calledBefore = calledOurs(ctx);
    let kit;
    try {
      kit = await loadTui();
    } catch {
      return;
    }
    widget = new FleetWidget({
      source: { running: () => runningTasks(deps, ctx) },
      kit,
      waiting: () => deps.delivery.running().length > 0,
      // Cheap, and no service asked: a call of ours in this session,
      // now or in its history, or its mark that results may wait.
      started: () => calledHere || calledBefore || deps.delivery.mayHavePending(ctx),
      show: (factory) => {
        if (!factory) {
          ctx.ui.setWidget(WIDGET_KEY, void 0);
          return;
        }
        ctx.ui.setWidget(WIDGET_KEY, (term, theme) => {
          const w = factory(() => term.requestRender());
          return { render: (width) => w.render(width, theme), invalidate: () => {
          } };
        });
      }
    });
    widget.kick(true);
  });
  pi.on("tool_execution_update", (event) => {
    if (widget && ourProgress(event.partialResult?.details)) {
      calledHere = true;
      widget.callRunning(event.toolCallId);
    }
  });
  pi.on("tool_execution_end", (event) => {
    if (ourResult(event.result?.details)) calledHere = true;
    widget?.callEnded(event.toolCallId);
  });
  pi.on("turn_end", () => {
    widget?.kick();
  });
  pi.on("agent_settled", () => {
    widget?.kick();
  });
  pi.on("session_shutdown", () => {
    widget?.dispose();
    widget = void 0;
  });
}

// src/profile-cache.ts
import { mkdirSync as mkdirSync4, readFileSync as readFileSync5, renameSync as renameSync3, statSync as statSync3, writeFileSync as writeFileSync3 } from "node:fs";
import { join as join5 } from "node:path";
var MAX_FOLDERS = 64;
function cachePath(dataDir2) {
  return join5(dataDir2, "cache", "profiles.json");
}
function read(dataDir2) {
  try {
    const c = JSON.parse(readFileSync5(cachePath(dataDir2), "utf8"));
    return c && typeof c === "object" ? c : {};
  } catch {
    return {};
  }
}
function unchanged(watched) {
  if (!watched?.length) return false;
  for (const w of watched) {
    const st = statSync3(w.path, { throwIfNoEntry: false });
    if (!st) {
      if (w.mtime_ms !== 0) return false;
      continue;
    }
    if (Math.max(Math.floor(st.mtimeMs), 1) !== w.mtime_ms) return false;
    if (w.size !== void 0 && !st.isDirectory() && st.size !== w.size) return false;
  }
  return true;
}
function rememberedProfiles(dataDir2, cwd) {
  return read(dataDir2)[cwd];
}
function rememberProfiles(dataDir2, cwd, profiles, watched) {
  try {
    const cache = read(dataDir2);
    cache[cwd] = { at: Date.now(), profiles, ...watched?.length ? { watched } : {} };
    const keep = Object.entries(cache).sort((a, b) => b[1].at - a[1].at).slice(0, MAX_FOLDERS);
    const path = cachePath(dataDir2);
    mkdirSync4(join5(dataDir2, "cache"), { recursive: true, mode: 448 });
    writeFileSync3(path + ".tmp", JSON.stringify(Object.fromEntries(keep)), { mode: 384 });
    renameSync3(path + ".tmp", path);
  } catch {
  }
}

// src/settings.ts
import { readFileSync as readFileSync6 } from "node:fs";
import { homedir as homedir2 } from "node:os";
import { join as join6 } from "node:path";
var GLOBAL_ONLY = ["bin", "address", "dataDir", "autoStart", "namespace", "taskQueue"];
var EXTENSION_KEYS = [...GLOBAL_ONLY, "tools", "maxLinesPerWindow", "onUpdateThrottleMs", "taskRetentionMs"];
var TOOL_FAMILIES = ["subagent", "task", "delegate", "primary"];
function agentDir(env = process.env) {
  return env.PI_CODING_AGENT_DIR || join6(homedir2(), ".pi", "agent");
}
function readExtensionSettings(path) {
  let raw;
  try {
    raw = readFileSync6(path, "utf8");
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(raw);
    return parsed && typeof parsed.extension === "object" && parsed.extension && !Array.isArray(parsed.extension) ? parsed.extension : {};
  } catch (e) {
    throw new Error(`${path}: ${e.message}`);
  }
}
function closest(name, known) {
  const fold = (s) => s.toLowerCase().replace(/[_-]/g, "");
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
    if (bestDist < 0 || d < bestDist || d === bestDist && raw < bestRaw) [best, bestDist, bestRaw] = [c, d, raw];
  }
  return best;
}
function editDistance(a, b) {
  const s = [...a];
  const t = [...b];
  const d = Array.from({ length: s.length + 1 }, (_, i) => Array.from({ length: t.length + 1 }, (_2, j) => i === 0 ? j : j === 0 ? i : 0));
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (s[i - 1] === t[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[s.length][t.length];
}
function checked(file, ext) {
  const warnings = [];
  const unknown = (path, key, known) => {
    const near = closest(key, known);
    warnings.push(
      near ? `subagents: unknown setting "${path}${key}" in ${file}: did you mean "${path}${near}"? The extension ignores it` : `subagents: unknown setting "${path}${key}" in ${file}: the extension ignores it (docs/settings.md lists its keys)`
    );
  };
  const wrong = (key, mustBe, v) => warnings.push(`subagents: ${file}: extension.${key} must be ${mustBe}, not ${JSON.stringify(v)}: ignored`);
  const kept = {};
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
        const tools = {};
        for (const [name, on] of Object.entries(v)) {
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
function loadSettings(cwd, env = process.env) {
  const globalFile = join6(agentDir(env), "subagents.json");
  const projectFile = join6(cwd, ".pi", "subagents.json");
  const g = checked(globalFile, readExtensionSettings(globalFile));
  const p = checked(projectFile, readExtensionSettings(projectFile));
  const global = g.kept;
  const project = p.kept;
  const ignored = GLOBAL_ONLY.filter((k) => project[k] !== void 0);
  const projectSafe = { ...project };
  for (const k of GLOBAL_ONLY) delete projectSafe[k];
  const projectTools = {};
  for (const [k, v] of Object.entries(project.tools ?? {})) {
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
    autoStart: env.SUBAGENTS_AUTOSTART !== void 0 ? env.SUBAGENTS_AUTOSTART !== "0" : global.autoStart ?? true,
    namespace: global.namespace,
    taskQueue: global.taskQueue,
    tools: {
      subagent: merged.tools.subagent ?? true,
      task: merged.tools.task ?? true,
      delegate: merged.tools.delegate ?? true,
      primary: merged.tools.primary ?? true
    },
    maxLinesPerWindow: linesPerWindow(env.SUBAGENTS_MAX_LINES_PER_WINDOW ?? merged.maxLinesPerWindow),
    onUpdateThrottleMs: wholeMs("onUpdateThrottleMs", knob(env, "ONUPDATE_THROTTLE_MS") ?? merged.onUpdateThrottleMs, 0, MAX_THROTTLE_MS) ?? DEFAULT_THROTTLE_MS,
    taskRetentionMs: wholeMs("taskRetentionMs", knob(env, "TASK_RETENTION_MS") ?? merged.taskRetentionMs, 1, MAX_RETENTION_MS),
    warnings
  };
}
var DEFAULT_THROTTLE_MS = 120;
var MAX_THROTTLE_MS = 6e4;
var MAX_RETENTION_MS = 30 * 24 * 3600 * 1e3;
function knob(env, name) {
  const v = env[`SUBAGENTS_${name}`] || env[`OHM_SUBAGENTS_${name}`];
  return v === void 0 || v === "" ? void 0 : v;
}
function wholeMs(key, v, lo, hi) {
  if (v === void 0 || v === "") return void 0;
  const n = typeof v === "string" ? Number(v) : v;
  if (typeof n === "number" && Number.isInteger(n) && n > hi) return hi;
  if (typeof n !== "number" || !Number.isInteger(n) || n < lo) {
    const name = key === "taskRetentionMs" ? "TASK_RETENTION_MS" : "ONUPDATE_THROTTLE_MS";
    throw new SubagentsError(
      "INVALID_INPUT",
      `${key} must be a whole number of milliseconds, ${lo} to ${hi}, not ${JSON.stringify(v)} (subagents.json "extension", SUBAGENTS_${name} or OHM_SUBAGENTS_${name})`
    );
  }
  return n;
}
function idleTtlSeconds(s) {
  return s.taskRetentionMs === void 0 ? void 0 : Math.max(1, Math.ceil(s.taskRetentionMs / 1e3));
}
function linesPerWindow(v) {
  if (v === void 0 || v === "") return 10;
  const n = typeof v === "string" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 1e3) {
    throw new SubagentsError("INVALID_INPUT", `maxLinesPerWindow must be a whole number 1 to 1000, not ${JSON.stringify(v)} (subagents.json "extension", or SUBAGENTS_MAX_LINES_PER_WINDOW)`);
  }
  return n;
}
function localService(s, env = process.env) {
  const address = s.address || env.TEMPORAL_ADDRESS || DEFAULT_ADDRESS;
  if (!isLocal(address, env)) return void 0;
  return {
    address,
    addressSet: Boolean(s.address || env.TEMPORAL_ADDRESS),
    namespace: s.namespace || env.TEMPORAL_NAMESPACE || void 0,
    taskQueue: s.taskQueue || env.SUBAGENTS_TASK_QUEUE || void 0,
    dataDir: dataDir(env, s.dataDir),
    autoStart: s.autoStart
  };
}
function connectionFlags(s) {
  const flags = [];
  if (s.address) flags.push("--address", s.address);
  if (s.namespace) flags.push("--namespace", s.namespace);
  if (s.taskQueue) flags.push("--task-queue", s.taskQueue);
  return flags;
}

// src/extension.ts
function quickExit() {
  try {
    setFlagsFromString("--liftoff-only");
  } catch {
  }
}
var questionsAheadMs = 5e3;
var signalled = false;
var listening = false;
function listenForSignals() {
  if (listening) return;
  listening = true;
  for (const sig of ["SIGTERM", "SIGHUP"]) {
    process.prependListener(sig, () => {
      signalled = true;
      if (process.listenerCount(sig) === 1) process.exit(sig === "SIGTERM" ? 143 : 129);
    });
  }
}
function interactive(ctx) {
  return ctx.mode === "tui" || ctx.mode === "rpc";
}
function StringEnum(Type, values, options) {
  return Type.Unsafe({ type: "string", enum: [...values], ...options?.description && { description: options.description } });
}
function schemas(Type) {
  const FileSpec = Type.Union([
    Type.String(),
    Type.Object({
      path: Type.String(),
      start: Type.Optional(Type.Integer({ minimum: 1 })),
      end: Type.Optional(Type.Integer({ minimum: 1 })),
      head: Type.Optional(Type.Integer({ minimum: 1 })),
      tail: Type.Optional(Type.Integer({ minimum: 1 }))
    })
  ]);
  const SubagentParams = Type.Object(
    {
      agent: Type.String({ minLength: 1, description: "Name of the agent profile to delegate to" }),
      task: Type.String({ minLength: 1, description: "The focused task for the subagent" }),
      sessionId: Type.Optional(Type.String({ description: "Continue this earlier session (its context is kept)" }))
    },
    { additionalProperties: false }
  );
  const TaskItem = Type.Object({
    subagent_type: Type.String({ description: "Profile to run the task with" }),
    description: Type.Optional(Type.String({ description: "Short label of the task" })),
    prompt: Type.String({ description: "What the subagent should do" }),
    cwd: Type.Optional(Type.String({ description: "Absolute folder to run in (default: this session's)" }))
  });
  const TaskParams = Type.Object({
    op: Type.Optional(StringEnum(Type, ["start", "status", "wait", "send", "cancel", "result", "resume", "apply", "reply", "schedule"], { description: "Operation (default start)" })),
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
    context: Type.Optional(StringEnum(Type, ["fresh", "fork"], { description: "start: fork starts the child from a copy of this conversation" })),
    worktree: Type.Optional(Type.Boolean({ description: "start: run in a git worktree; op apply (id, discard?) applies its change" })),
    discard: Type.Optional(Type.Boolean({ description: "apply: drop the change instead" })),
    message: Type.Optional(Type.String({ description: "reply: the answer to the question a task's child asked (id: its task_id)" })),
    plan: Type.Optional(Type.Unknown({ description: PLAN_HELP })),
    args: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "start: the saved plan's arguments" })),
    schedule: Type.Optional(Type.Unknown({ description: SCHEDULE_HELP }))
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
        files: Type.Optional(Type.Array(FileSpec, { description: "Files to put before the prompt" }))
      }),
      { minItems: 1, maxItems: 16 }
    ),
    profile: Type.Optional(Type.String({ description: "Default profile for tasks that name none" }))
  });
  const SessionParams = Type.Object({ sessionId: Type.String({ description: "The session ID returned by delegate_to_subagents" }) });
  return { SubagentParams, TaskParams, DelegateParams, SessionParams };
}
var PLAN_HELP = `start: run a plan instead of one task: a saved plan's name, or {steps:[...]} whose steps are durable subagents. A step is a task {key, agent, task, cwd?, continue?: KEY (next turn of that step's session), context?: "fork", verdicts?: [words], gate?: {command}, budget?: {toolCalls?, tokens?, cost?}} or a group: {steps:[...]} in sequence, {parallel:[...]} at once (a failure skips the rest of its group only), {loop: {max, until: {step, verdict}}, steps:[...]}. In a task, {steps.KEY.output} (or .verdict) is an earlier step's result, {args.NAME} an argument, {round} the loop's round. resume: id of a failed plan, plan to change steps.`;
var CANCEL_WAIT_MS = 1e4;
var BUILTIN_TOOLS = ["read", "bash", "edit", "write", "grep", "find", "ls"];
function text(s, details) {
  return { content: [{ type: "text", text: s }], details };
}
function codeOf(e) {
  if (e instanceof SubagentsError) return { code: e.code, message: e.message, category: e.category };
  return { code: "SUBAGENT_FAILED", message: e instanceof Error ? e.message : String(e), category: "runtime" };
}
function activate(pi, host) {
  const { Type } = host;
  const { SubagentParams, TaskParams, DelegateParams, SessionParams } = schemas(Type);
  let tui;
  const loadTui = () => {
    if (!tui)
      host.loadTui().then((m) => tui = m).catch(() => {
      });
  };
  listenForSignals();
  let shutDown = false;
  const terminating = () => signalled || shutDown;
  let settings = loadSettings(process.cwd());
  let current;
  const status = (line) => {
    if (current?.hasUI) current.ui.setStatus("subagents", line);
    else process.stderr.write(`subagents: ${line}
`);
  };
  const cli = (passive = false) => new SubagentsCli({ bin: settings.bin, connection: connectionFlags(settings), local: localService(settings), passive, onStatus: status });
  const delivery = new Delivery(pi, cli, () => localService(settings)?.dataDir);
  const registered = new Set(BUILTIN_TOOLS);
  const failedCalls = /* @__PURE__ */ new Set();
  function failed(toolCallId, result) {
    failedCalls.add(toolCallId);
    return result;
  }
  pi.on("tool_result", (event) => {
    if (failedCalls.delete(event.toolCallId)) return { isError: true };
  });
  let startedUp = Promise.resolve();
  async function startUpDone() {
    let seen;
    while (seen !== startedUp) {
      seen = startedUp;
      await seen;
    }
  }
  async function begin(ctx, verb, request) {
    await startUpDone();
    const ttl = verb === "start" ? idleTtlSeconds(settings) : void 0;
    return delivery.own(
      cli().call(verb, [], [], { ...request, parent_session_id: delivery.delivering(ctx), deliver: true, ...ttl !== void 0 ? { idle_ttl_seconds: ttl } : {} })
    );
  }
  function throttled(onUpdate) {
    let lastAt = 0;
    let lastFrame = "";
    return (t, details) => {
      if (!onUpdate) return;
      const frame = JSON.stringify([t, details]);
      const now = Date.now();
      if (frame === lastFrame || lastAt > 0 && now - lastAt < settings.onUpdateThrottleMs) return;
      lastAt = now;
      lastFrame = frame;
      onUpdate(text(t, details));
    };
  }
  async function delegate(ctx, request, opts) {
    return follow(await begin(ctx, "start", request), opts);
  }
  async function follow(started, opts) {
    const id = started.delegation_id ?? started.task_id;
    if (!id) return started;
    if (opts.async) {
      if (started.delegation_id) delivery.watch(started.delegation_id);
      return started;
    }
    let cancelling;
    const onAbort = () => cancelling ??= new Promise((r) => setImmediate(r)).then(() => terminating() ? void 0 : cancelAndFollow(id));
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });
    const update = throttled(opts.onUpdate);
    const atQuestion = new AbortController();
    let asked;
    try {
      const env = await cli().follow(
        id,
        (env2) => {
          if (opts.progress) {
            const p = opts.progress(env2);
            update(p.text, p.details);
          }
          if (!asked && asking(env2).length > 0) {
            asked = env2;
            atQuestion.abort();
          }
        },
        opts.signal ? AbortSignal.any([opts.signal, atQuestion.signal]) : atQuestion.signal
      ).catch((e) => {
        if (asked && !cancelling) return asked;
        throw e;
      });
      if (asked && !cancelling) {
        delivery.toldOf(asking(asked).map(questionKey));
        if (started.delegation_id) delivery.watch(started.delegation_id);
        return { ...asked, wait_status: "question" };
      }
      if (cancelling) return await cancelling ?? env;
      if (!env.done && started.delegation_id) delivery.watch(started.delegation_id);
      return env;
    } catch (e) {
      if (cancelling) {
        const after = await cancelling;
        if (after) return after;
      }
      if (started.delegation_id && !opts.signal?.aborted) delivery.watch(started.delegation_id);
      throw e;
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
    }
  }
  async function cancelAndFollow(id) {
    try {
      await cli().call("cancel", [], [id]);
      const env = await cli().follow(id, () => {
      }, void 0, CANCEL_WAIT_MS);
      if (env.done) return env;
      void cli().follow(id, () => {
      }, void 0, 6e4).then((end) => end.delegation_id && end.done ? cli().call("ack", ["--by", "aborted"], [end.delegation_id]) : void 0).catch(() => {
      });
      return env;
    } catch {
      return void 0;
    }
  }
  const progressOf = (env) => ({ text: progressText(env, 3), details: { streaming: true, envelope: env } });
  async function fullOutput(env) {
    const it = items(env)[0];
    if (!it?.output_truncated || !it.done) return void 0;
    try {
      const out = await cli().call("output", ["--full", "--from", "0"], [it.task_id]);
      return out.text && out.text !== it.output ? out.text : void 0;
    } catch {
      return void 0;
    }
  }
  if (settings.tools.subagent) {
    pi.registerTool({
      name: "subagent",
      label: "Subagent",
      description: "Delegate a focused task to a named agent profile, run as a durable child pi session. Returns the agent's finalized result with its session ID; pass sessionId to continue that session with its context.",
      parameters: SubagentParams,
      async execute(callId, params, signal, onUpdate, ctx) {
        try {
          const started = params.sessionId ? await begin(ctx, "send", { task_id: params.sessionId, prompt: params.task, agent: params.agent, sticky: true, cwd: ctx.cwd }) : await begin(ctx, "start", {
            tasks: [{ name: params.agent, prompt: params.task, profile: params.agent, cwd: ctx.cwd }],
            // The SingleResult contract: this tool runs read-only agents unless
            // subagents.allowWrite is set.
            tool: "subagent"
          });
          const env = await follow(started, { signal, onUpdate, progress: progressOf });
          const r = subagentResult(env, params.agent, params.task, await fullOutput(env));
          return failedResult(env) || items(env).length === 0 ? failed(callId, text(r.text, r.details)) : text(r.text, r.details);
        } catch (e) {
          const err = codeOf(e);
          return failed(callId, text(err.message, { mode: "single", results: [], error: subagentError(err.code, err.message) }));
        }
      }
    });
    registered.add("subagent");
  }
  async function runTask(op, params, invocation, callId, signal, onUpdate, ctx) {
    await startUpDone();
    const progress = (env2) => ({ text: planHeader(env2) + items(env2).map((it) => taskTree(it)).join("\n"), details: taskDetails(op, env2, invocation) });
    const ids = params.ids?.length ? params.ids : params.id ? [params.id] : [];
    let env;
    let said;
    switch (op) {
      case "start": {
        if (params.plan !== void 0 && params.plan !== null) {
          env = await delegate(ctx, planRequest(ctx, params.plan, params.args, params.cwd), { signal, onUpdate, async: params.async, progress });
          break;
        }
        const list = params.tasks?.length ? params.tasks : [{ subagent_type: params.subagent_type ?? "", description: params.description, prompt: params.prompt ?? "", cwd: params.cwd }];
        for (const t of list) {
          if (!t.subagent_type || list.length === 1 && !t.prompt?.trim()) {
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
              worktree: params.worktree || void 0
            })),
            max_concurrency: list.length > 1 && !params.parallel ? 1 : void 0,
            tool: "task",
            parent_session_file: params.context === "fork" ? ctx.sessionManager.getSessionFile() : void 0
          },
          { signal, onUpdate, async: params.async, progress }
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
        env = ids.length === 1 ? await cli().follow(
          ids[0],
          (e) => {
            const p = progress(e);
            update(p.text, p.details);
          },
          signal,
          params.timeout_ms
        ) : await cli().call("wait", params.timeout_ms ? ["--timeout-ms", String(params.timeout_ms)] : [], ids, void 0, signal);
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
        const changed = params.plan === void 0 || params.plan === null ? void 0 : planDocument(params.plan);
        if (typeof changed === "string") throw new SubagentsError("INVALID_INPUT", "resume takes the changed plan document, not a saved plan's name");
        const input = changed !== void 0 || params.args ? { plan: changed, args: params.args } : void 0;
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
    const isFailure = (op === "start" || op === "send" || op === "wait") && failedResult(env) || op === "apply" && (env.status === "conflict" || env.status === "failed");
    const done = (r) => isFailure ? failed(callId, r) : r;
    const details = taskDetails(op === "result" ? "status" : op, env, invocation);
    let body = said !== void 0 ? said : op === "apply" ? env.text ?? env.status ?? "" : op === "reply" ? `Answered: the child of ${params.id} goes on with your answer; its result comes into this session when it ends.` : planHeader(env) + items(env).map((it) => taskTree(it, op === "start" ? params.prompt : void 0)).join("\n\n");
    if (op === "start" && params.async) {
      body = env.plan ? `${planHeader(env)}Started the plan in the background: its result is delivered into this session when it ends; task op:"status", op:"wait" or op:"cancel" with id ${env.delegation_id} looks at it now.` : `Started ${items(env).length} task(s) in the background: ${items(env).map((it) => it.task_id).join(", ")}. Their results are delivered into this session when they finish; task op:"status" or op:"wait" with a task_id looks at them now.`;
    }
    if (op === "wait" && (env.wait_status === "timeout" || env.wait_status === "aborted")) {
      const code = env.wait_status === "timeout" ? "task_wait_timeout" : "task_wait_aborted";
      const message = env.wait_status === "timeout" ? 'the task is still running: wait again, or look with op "status"' : "waiting was aborted (the task goes on)";
      return failed(callId, text(`Error (${code}): ${message}
${body}`, {
        ...details,
        error: { code, message, unified_code: env.wait_status === "timeout" ? "SUBAGENT_TIMEOUT" : "CANCELLED" },
        error_category: env.wait_status === "timeout" ? "timeout" : "runtime"
      }));
    }
    return done(text(body, details));
  }
  function planRequest(ctx, plan, args, cwd) {
    const doc = planDocument(plan);
    const where = { cwd: cwd || ctx.cwd, args, tool: "task", parent_session_file: ctx.sessionManager.getSessionFile() };
    return typeof doc === "string" ? { name: doc, ...where } : { plan: doc, ...where };
  }
  function planDocument(plan) {
    if (typeof plan !== "string" || !plan.trim().startsWith("{")) return plan;
    try {
      return JSON.parse(plan);
    } catch {
      throw new SubagentsError("INVALID_INPUT", "plan is neither a saved plan's name nor a JSON plan document");
    }
  }
  function taskError(callId, op, e, signal) {
    let err = codeOf(e);
    if (op === "wait" && signal?.aborted) err = { code: "CANCELLED", message: "waiting was aborted (the task goes on)", category: "runtime" };
    const seed = taskErrorCode(op, err.code);
    return failed(
      callId,
      text(`Error (${seed.code}): ${err.message}`, {
        contract_version: "task.v1",
        op,
        backend: "temporal",
        error: { code: seed.code, message: err.message, unified_code: err.code },
        error_category: seed.category ?? err.category
      })
    );
  }
  if (settings.tools.task) {
    pi.registerTool({
      name: "task",
      label: "Task",
      description: 'Run subagent tasks as durable Temporal workflows. op "start" runs one task (subagent_type, description, prompt) or tasks[] (parallel: true to run them at once) and waits for the result; async: true returns at once and delivers the result into this session later. op "status"/"wait"/"cancel" take id or ids (wait: timeout_ms); op "send" sends a follow-up prompt to a task.',
      parameters: TaskParams,
      async execute(callId, params, signal, onUpdate, ctx) {
        const op = params.op ?? "start";
        try {
          return await runTask(op, params, "task-routed", callId, signal, onUpdate, ctx);
        } catch (e) {
          return taskError(callId, op, e, signal);
        }
      }
    });
    registered.add("task");
  }
  async function profilesFor(cwd, passive) {
    const local = localService(settings);
    try {
      const list = await cli(passive).call("profiles", ["--cwd", cwd, ...local ? ["--watched"] : []]).catch((e) => {
        if (local && e instanceof SubagentsError && /-watched/.test(e.message)) return cli(passive).call("profiles", ["--cwd", cwd]);
        throw e;
      });
      if (local) rememberProfiles(local.dataDir, cwd, list.profiles ?? [], list.watched);
      return list.profiles ?? [];
    } catch (e) {
      if (e instanceof SubagentsError && e.notRunning && local) return rememberedProfiles(local.dataDir, cwd)?.profiles ?? [];
      throw e;
    }
  }
  async function registerPrimaryTools(ctx, passive = false) {
    if (!settings.tools.primary) return;
    const remembered = passive ? rememberedPrimary(ctx.cwd) : void 0;
    if (!remembered) {
      const listed = profilesFor(ctx.cwd, passive).then(registerPrimary);
      primaryListing = listed.catch(() => {
      });
      await listed;
      return;
    }
    registerPrimary(remembered.profiles);
    if (unchanged(remembered.watched)) return;
    primaryListing = profilesFor(ctx.cwd, true).then(registerPrimary, () => {
    });
    await primaryListing;
  }
  let primaryListing;
  function rememberedPrimary(cwd) {
    const local = localService(settings);
    return local ? rememberedProfiles(local.dataDir, cwd) : void 0;
  }
  function registerPrimary(profiles) {
    for (const p of profiles) {
      if (!p.primary || p.error || p.internal) continue;
      if (registered.has(`primary:${p.name}`)) continue;
      const name = primaryToolName(p.name, registered);
      registered.add(name);
      registered.add(`primary:${p.name}`);
      const usesQuery = p.name === "librarian" || p.name === "finder";
      const fields = {};
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
        async execute(callId, params, signal, onUpdate, c) {
          const ask = String(params.query ?? params.task ?? "");
          const prompt = primaryPrompt(ask, params.context, params.files);
          try {
            return await runTask(
              "start",
              { subagent_type: p.name, description: params.description, prompt, async: params.async },
              "primary-tool",
              callId,
              signal,
              onUpdate,
              c
            );
          } catch (e) {
            return taskError(callId, "start", e, signal);
          }
        }
      });
    }
  }
  if (settings.tools.delegate) {
    pi.registerTool({
      name: "delegate_to_subagents",
      label: "Delegate to subagents",
      description: "Spawn one or more parallel sub-agents (1-16 tasks, at most 4 at once) as durable Temporal workflows. Returns a summary line with the session ID of each task; read results with get_subagent_output or get_subagent_session.",
      parameters: DelegateParams,
      async execute(callId, params, signal, onUpdate, ctx) {
        const env = await delegate(
          ctx,
          // tool "delegate": a child's last text is its result (the
          // delegate contract), finalize only where its profile asks.
          { tasks: params.tasks.map((t) => ({ ...t, cwd: t.cwd || ctx.cwd })), profile: params.profile, tool: "delegate" },
          { signal, onUpdate, progress: (e) => ({ text: progressText(e, settings.maxLinesPerWindow), details: delegateResult(e, settings.maxLinesPerWindow).details }) }
        );
        const r = delegateResult(env, settings.maxLinesPerWindow);
        return failedResult(env) ? failed(callId, text(r.text, r.details)) : text(r.text, r.details);
      },
      renderCall(args, theme) {
        const profiles = [...new Set(args.tasks.map((t) => t.profile).filter(Boolean))];
        let s = `${theme.fg("toolTitle", theme.bold("delegate_to_subagents"))} ${args.tasks.length} sub-agent${args.tasks.length === 1 ? "" : "s"}`;
        if (args.profile) s += ` (default profile: ${args.profile})`;
        if (profiles.length) s += ` profiles: [${profiles.join(", ")}]`;
        if (!tui) throw new Error("the TUI module is still loading");
        return new tui.Text(s, 0, 0);
      },
      renderResult(result, { expanded }, theme) {
        if (!tui) throw new Error("the TUI module is still loading");
        const d = result.details;
        if (!d?.windows) return new tui.Text(resultText(result), 0, 0);
        return new tui.Text(renderDelegation(d.windows, { expanded, maxLines: d.maxLinesPerWindow, done: d.status === "done" }, theme), 0, 0);
      }
    });
    const truncating = (result, expanded, theme) => {
      if (!tui) throw new Error("the TUI module is still loading");
      const maxLines = result.details?.maxLines ?? settings.maxLinesPerWindow;
      return new tui.Text(renderTruncated(resultText(result), { expanded, maxLines }, theme), 0, 0);
    };
    const seedStatus = (env) => {
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
        const env = await cli().call("output", ["--full", "--from", "0"], [params.sessionId]).catch((e) => {
          throw codeOf(e).code === "SESSION_NOT_FOUND" ? new Error(sessionNotFound(params.sessionId)) : e;
        });
        const it = items(env)[0];
        return text(env.text ?? "(no text output from sub-agent)", {
          sessionId: params.sessionId,
          status: seedStatus(env),
          taskName: it?.name,
          runCount: env.run_count ?? 1,
          maxLines: settings.maxLinesPerWindow
        });
      },
      renderResult: (result, { expanded }, theme) => truncating(result, expanded, theme)
    });
    pi.registerTool({
      name: "get_subagent_session",
      label: "Sub-agent session",
      description: "Retrieve the complete transcript of a sub-agent session: messages, tool calls and tool results of every run.",
      parameters: SessionParams,
      async execute(_id, params) {
        const env = await cli().call("transcript", [], [params.sessionId]).catch((e) => {
          throw codeOf(e).code === "SESSION_NOT_FOUND" ? new Error(sessionNotFound(params.sessionId)) : e;
        });
        const it = items(env)[0];
        return text(env.text ?? "", {
          sessionId: params.sessionId,
          status: seedStatus(env),
          taskName: it?.name,
          messageCount: env.message_count ?? 0,
          exitCode: it?.exit_code ?? 0,
          model: it ? modelLabel(it) : void 0,
          runCount: env.run_count ?? 1,
          maxLines: settings.maxLinesPerWindow
        });
      },
      renderResult: (result, { expanded }, theme) => truncating(result, expanded, theme)
    });
    pi.registerTool({
      name: "list_subagent_profiles",
      label: "Sub-agent profiles",
      description: "List the named sub-agent profiles delegate_to_subagents can use.",
      parameters: Type.Object({}),
      async execute(_id, _params, _signal, _onUpdate, ctx) {
        const list = await cli().call("profiles", ["--cwd", ctx.cwd]);
        const profiles = list.profiles ?? [];
        const plans = list.plans ?? [];
        const planText = plans.length ? `

Saved plans (task tool: plan: NAME, args):
${plans.map((p) => p.summary).join("\n")}` : "";
        if (profiles.length === 0) return text(NO_PROFILES_TEXT + planText, { count: 0 });
        return text(profiles.map((p) => p.summary).join("\n") + planText, {
          count: profiles.length,
          profiles: Object.fromEntries(profiles.map((p) => [p.name, p.summary])),
          ...plans.length ? { plans: Object.fromEntries(plans.map((p) => [p.name, p.summary])) } : {}
        });
      }
    });
  }
  if (settings.tools.primary) registerPrimary(rememberedPrimary(process.cwd())?.profiles ?? []);
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
        const body = items(env).map((it) => `${taskTree(it)}${it.ui_url ? `
  ${it.ui_url}` : ""}`);
        ctx.ui.notify([env.delegation_id ? `${env.delegation_id} \xB7 ${env.status}${env.ui_url ? ` \xB7 ${env.ui_url}` : ""}` : "", ...body].filter(Boolean).join("\n"), "info");
      } catch (e) {
        ctx.ui.notify(codeOf(e).message, "error");
      }
    }
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
        const from = [];
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
    }
  });
  async function startUp(ctx, passive) {
    const child = nestedParent() !== void 0;
    try {
      if (!child) await registerPrimaryTools(ctx, passive);
    } catch (e) {
      if (e instanceof SubagentsError && e.notRunning) return;
      warn(ctx, `subagents: primary profile tools not registered: ${codeOf(e).message}`);
    }
    if (current !== ctx) return;
    try {
      await delivery.resume(ctx);
      const running = delivery.running();
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
  function warn(ctx, message) {
    if (current === ctx && ctx.hasUI) ctx.ui.notify(message, "warning");
  }
  function say(ctx, line, level = "info") {
    if (ctx.hasUI) ctx.ui.notify(line, level);
    else process.stderr.write(`${line}
`);
  }
  let strayLookOf;
  async function lookForStrays(ctx) {
    const local = localService(settings);
    const me = delivery.parent(ctx);
    if (!local || strayLookOf === me) return;
    const found = strays(local.dataDir, ctx.cwd, me);
    if (found.length === 0) return;
    let report;
    try {
      report = await delivery.strayReport(found);
    } catch (e) {
      if (e instanceof SubagentsError && e.notRunning) return;
      throw e;
    }
    strayLookOf = me;
    if (report.open > 0 && current === ctx) say(ctx, strayHint(report));
  }
  onServiceStarted(() => {
    if (current) {
      status("subagents service started");
      const ctx = current;
      startedUp = startedUp.then(() => startUp(ctx, false)).catch(() => {
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
      else process.stderr.write(`${w}
`);
    }
    delivery.opened(ctx);
    startedUp = startUp(ctx, true).catch(() => {
    });
  });
  let questionLookOf;
  const questionsKey = (cwd) => JSON.stringify([cwd, localService(settings)?.dataDir, connectionFlags(settings)]);
  const askQuestions = (cwd) => cli(true).call("questions", ["--cwd", cwd]).catch(() => void 0);
  let questionsAhead = {
    key: questionsKey(process.cwd()),
    at: Date.now(),
    answer: askQuestions(process.cwd())
  };
  async function tellWaitingQuestions(ctx) {
    const me = delivery.parent(ctx);
    if (questionLookOf === me) return;
    questionLookOf = me;
    const ahead = questionsAhead;
    questionsAhead = void 0;
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
    primaryListing = void 0;
    await listing;
    await tellWaitingQuestions(ctx).catch(() => {
    });
    const pending = delivery.mayHavePending(ctx);
    if (interactive(ctx) || !pending && !delivery.mayHaveScheduled(ctx)) return;
    await startUpDone();
    await delivery.resume(ctx).catch(() => {
    });
    const waiting = delivery.waitingFor("earlier");
    if (waiting > 0) {
      say(ctx, `subagents: waiting for ${waiting} delegation${waiting === 1 ? "" : "s"} of an earlier run of this session before the prompt goes to the model (Ctrl-C leaves them for a later start)`);
      await delivery.settled("earlier", ctx.signal);
    }
    for (const origin of ["earlier", "scheduled"]) {
      for (const d of delivery.takeDrafts(false, origin).entries) {
        sendDraft(pi, d, { deliverAs: "nextTurn" });
      }
    }
  });
  pi.on("turn_end", async (_event, ctx) => {
    void delivery.ackPersisted(ctx);
    const { entries, turn } = delivery.takeDrafts(interactive(ctx));
    if (entries.length) return turn ? { entries, continue: true } : { entries };
  });
  pi.on("agent_before_settle", async (_event, ctx) => {
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
      ctx.ui.setStatus("subagents", running.length ? `subagents: ${running.length} running` : void 0);
    }
  });
  pi.on("session_shutdown", async () => {
    shutDown = true;
    current = void 0;
    delivery.shutdown();
    await stopServers();
  });
}
export {
  activate
};
