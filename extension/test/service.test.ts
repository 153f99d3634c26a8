import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { binarySearched, findBinary, isLocal, newerRelease, ownVersion, platformBinary, platformPackage, releaseOf, sameAddress, socketPath, splitAddress } from "../src/service.ts";
import { loadSettings, localService } from "../src/settings.ts";

test("which Temporal is the local service", () => {
	const cases: Array<[string, NodeJS.ProcessEnv, boolean]> = [
		["127.0.0.1:7233", {}, true],
		["localhost:7233", {}, true],
		["[::1]:7233", {}, true],
		["127.0.0.2:17233", {}, true],
		["temporal.internal:7233", {}, false],
		["10.0.0.5:7233", {}, false],
		["my-ns.a1b2c.tmprl.cloud:7233", {}, false],
		["127.0.0.1:7233", { TEMPORAL_API_KEY: "k" }, false],
		["127.0.0.1:7233", { TEMPORAL_PROFILE: "prod" }, false],
		["127.0.0.1:7233", { TEMPORAL_TLS_CLIENT_CERT_PATH: "/c.pem" }, false],
		["not an address", {}, false],
	];
	for (const [address, env, want] of cases) assert.equal(isLocal(address, env), want, `${address} ${JSON.stringify(env)}`);
	assert.deepEqual(splitAddress("[::1]:7233"), { host: "::1", port: 7233 });
	assert.ok(sameAddress("localhost:7233", "127.0.0.1:7233"));
	assert.ok(!sameAddress("127.0.0.1:7233", "127.0.0.1:7234"));
});

test("a remote address falls back to subagents serve; a local one uses the socket", () => {
	const agent = mkdtempSync(join(tmpdir(), "subagents-settings-"));
	const env = { PI_CODING_AGENT_DIR: agent, HOME: agent, SUBAGENTS_DATA_DIR: join(agent, "data") };
	const local = localService(loadSettings(agent, env), env);
	assert.equal(local?.address, "127.0.0.1:7233");
	assert.equal(local?.addressSet, false);
	assert.equal(socketPath(local!.dataDir), join(agent, "data", "subagents.sock"));
	assert.equal(local?.autoStart, true);
	const remote = { ...env, TEMPORAL_ADDRESS: "temporal.internal:7233" };
	assert.equal(localService(loadSettings(agent, remote), remote), undefined);
	const off = { ...env, SUBAGENTS_AUTOSTART: "0" };
	assert.equal(localService(loadSettings(agent, off), off)?.autoStart, false);
});

test("a project's settings cannot choose the binary, the address or the data dir", () => {
	const agent = mkdtempSync(join(tmpdir(), "subagents-settings-"));
	const project = mkdtempSync(join(tmpdir(), "subagents-project-"));
	mkdirSync(join(project, ".pi"));
	writeFileSync(
		join(project, ".pi", "subagents.json"),
		JSON.stringify({ extension: { bin: "./evil", address: "attacker.example:7233", dataDir: "/tmp/x", autoStart: true, maxLinesPerWindow: 3 } }),
	);
	writeFileSync(join(agent, "subagents.json"), JSON.stringify({ extension: { autoStart: false } }));
	const s = loadSettings(project, { PI_CODING_AGENT_DIR: agent });
	assert.equal(s.bin, "subagents");
	assert.equal(s.address, undefined);
	assert.equal(s.dataDir, undefined);
	assert.equal(s.autoStart, false);
	assert.equal(s.maxLinesPerWindow, 3, "the project still sets what is harmless");
});

test("the profiles a pi registers with no service running are the ones last listed for its folder", async () => {
	const { rememberProfiles, rememberedProfiles } = await import("../src/profile-cache.ts");
	const dir = mkdtempSync(join(tmpdir(), "subagents-cache-"));
	assert.equal(rememberedProfiles(dir, "/repo"), undefined);
	const librarian = { name: "librarian", scope: "builtin", primary: true } as never;
	rememberProfiles(dir, "/repo", [librarian]);
	rememberProfiles(dir, "/other", []);
	assert.deepEqual(rememberedProfiles(dir, "/repo")?.profiles, [librarian]);
	assert.deepEqual(rememberedProfiles(dir, "/other")?.profiles, [], "an empty listing is remembered too");
	assert.equal(rememberedProfiles(dir, "/elsewhere"), undefined);
});

test("a remembered listing serves without asking while nothing it was read from has changed", async () => {
	const { rememberProfiles, rememberedProfiles, unchanged } = await import("../src/profile-cache.ts");
	const dir = mkdtempSync(join(tmpdir(), "subagents-cache-"));
	const agents = join(dir, "agents");
	mkdirSync(agents);
	const file = join(agents, "w.md");
	writeFileSync(file, "---\nname: w\n---\n");
	const stamp = (p: string) => ({ path: p, mtime_ms: Math.max(Math.floor(statSync(p).mtimeMs), 1), ...(statSync(p).isDirectory() ? {} : { size: statSync(p).size }) });
	const watched = [stamp(agents), stamp(file), { path: join(dir, "project", ".pi"), mtime_ms: 0 }];
	rememberProfiles(dir, "/repo", [], watched);
	assert.equal(unchanged(rememberedProfiles(dir, "/repo")?.watched), true, "nothing changed");
	assert.equal(unchanged(undefined), false, "a listing kept without what it depends on is asked for again");

	writeFileSync(file, "---\nname: w\nprimary: true\n---\n");
	utimesSync(file, new Date(Date.now() + 3_600_000), new Date(Date.now() + 3_600_000));
	assert.equal(unchanged(watched), false, "a file edited");

	const again = [stamp(agents), stamp(file), { path: join(dir, "project", ".pi"), mtime_ms: 0 }];
	assert.equal(unchanged(again), true);
	mkdirSync(join(dir, "project", ".pi"), { recursive: true });
	assert.equal(unchanged(again), false, "a folder that was absent appeared");
	rmSync(agents, { recursive: true });
	assert.equal(unchanged([stamp(join(dir, "project", ".pi")), { ...again[0] }]), false, "a folder that was there went");
});

test("a start that loses the data dir to another service waits for that one, whatever the shared log says after it", async (t) => {
	const { startService } = await import("../src/service.ts");
	const { createServer } = await import("node:net");
	const dir = mkdtempSync(join(tmpdir(), "subagents-start-"));
	// The loser says why it stops, then the winner's start-up lines follow it
	// in the same log before the loser's exit is seen.
	const loser = join(dir, "loser.sh");
	writeFileSync(
		loser,
		`#!/bin/sh\necho "subagents: a subagents service already runs for data dir ${dir} (pid 1)" >&2\nfor i in 1 2 3 4 5 6 7 8; do echo "winner line $i"; done\nexit 2\n`,
		{ mode: 0o755 },
	);
	const winner = createServer();
	const listening = setTimeout(() => winner.listen(socketPath(dir)), 400);
	t.after(() => {
		clearTimeout(listening);
		winner.close();
	});
	await startService({ bin: loser, address: "127.0.0.1:7233", dir, env: process.env });

	// A start that fails on its own says why, from its own lines.
	const broken = join(dir, "broken.sh");
	writeFileSync(broken, `#!/bin/sh\necho "subagents: database is corrupt" >&2\nexit 2\n`, { mode: 0o755 });
	const other = mkdtempSync(join(tmpdir(), "subagents-start-"));
	writeFileSync(join(other, "service.log"), "an older service's lines: already runs for data dir\n");
	// The start gives up at once rather than after its minute of waiting.
	await assert.rejects(startService({ bin: broken, address: "127.0.0.1:7233", dir: other, env: process.env }), /exited 2: subagents: database is corrupt$/);
});

test("the service the extension starts reads the sessions contract's prompts/ beside the extension", async () => {
	const { ownPromptsDir, withOwnPrompts } = await import("../src/service.ts");
	assert.match(ownPromptsDir(), /extension[/\\]src[/\\]\.\.[/\\]prompts$|extension[/\\]prompts$/);
	assert.equal(withOwnPrompts({}).SUBAGENTS_PROMPT_DIRS, ownPromptsDir());
	assert.equal(withOwnPrompts({ SUBAGENTS_PROMPT_DIRS: "/mine" }).SUBAGENTS_PROMPT_DIRS, `/mine:${ownPromptsDir()}`);
	assert.equal(withOwnPrompts({ SUBAGENTS_PROMPT_DIRS: ownPromptsDir() }).SUBAGENTS_PROMPT_DIRS, ownPromptsDir(), "named once");
});

test("the service a child starts keeps none of that child's variables", async () => {
	const { serviceEnv } = await import("../src/service.ts");
	const child = {
		PATH: "/bin",
		PI_CODING_AGENT_DIR: "/agent",
		PI_SUBAGENT_CHILD: "1",
		PI_SUBAGENT_DEPTH: "1",
		PI_SUBAGENT_NESTED: "1",
		PI_SUBAGENT_PARENT_SESSION: "task-of-the-child",
		PI_SUBAGENT_TOKEN: "its-token",
		OHM_SUBAGENTS_OUTPUT_MAX_CHARS: "50",
	};
	const env = serviceEnv(child);
	for (const k of ["PI_SUBAGENT_CHILD", "PI_SUBAGENT_DEPTH", "PI_SUBAGENT_NESTED", "PI_SUBAGENT_PARENT_SESSION", "PI_SUBAGENT_TOKEN"]) {
		assert.equal(env[k], undefined, `${k} reached the service`);
	}
	assert.equal(env.PATH, "/bin");
	assert.equal(env.PI_CODING_AGENT_DIR, "/agent");
	assert.equal(env.OHM_SUBAGENTS_OUTPUT_MAX_CHARS, "50", "a knob the service never reads of its own is left as it was");
	assert.ok(env.SUBAGENTS_PROMPT_DIRS, "the prompts beside the extension are still added");
	assert.equal(child.PI_SUBAGENT_TOKEN, "its-token", "the pi's own environment is not changed");
});

test("maxLinesPerWindow comes from the settings or SUBAGENTS_MAX_LINES_PER_WINDOW, checked", () => {
	const agent = mkdtempSync(join(tmpdir(), "subagents-settings-"));
	writeFileSync(join(agent, "subagents.json"), JSON.stringify({ extension: { maxLinesPerWindow: 4 } }));
	assert.equal(loadSettings(agent, { PI_CODING_AGENT_DIR: agent }).maxLinesPerWindow, 4);
	assert.equal(loadSettings(agent, { PI_CODING_AGENT_DIR: agent, SUBAGENTS_MAX_LINES_PER_WINDOW: "7" }).maxLinesPerWindow, 7);
	assert.throws(
		() => loadSettings(agent, { PI_CODING_AGENT_DIR: agent, SUBAGENTS_MAX_LINES_PER_WINDOW: "lots" }),
		(e: { code?: string; message: string }) => e.code === "INVALID_INPUT" && e.message.includes('not "lots"'),
	);
});

test("the binary: the bin setting and SUBAGENTS_BIN win, then this platform's package beside the extension, then PATH", () => {
	const root = mkdtempSync(join(tmpdir(), "subagents-platform-"));
	try {
		// An npm install: the extension's package and its platform package side by side.
		const pkg = join(root, "node_modules", ...platformPackage().split("/"));
		mkdirSync(join(pkg, "bin"), { recursive: true });
		writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: platformPackage(), version: "0.1.0" }));
		const bin = join(pkg, "bin", "subagents");
		writeFileSync(bin, "#!/bin/sh\n", { mode: 0o755 });
		const onPathDir = join(root, "path");
		mkdirSync(onPathDir);
		writeFileSync(join(onPathDir, "subagents"), "#!/bin/sh\n", { mode: 0o755 });
		const from = pathToFileURL(join(root, "node_modules", "@durable-pi", "subagents", "dist", "extension.js")).href;
		const env = { PATH: onPathDir };

		assert.equal(platformBinary(from), bin);
		assert.equal(findBinary(undefined, env, from), bin);
		assert.equal(findBinary(join(onPathDir, "subagents"), env, from), join(onPathDir, "subagents"));
		assert.equal(findBinary(undefined, { ...env, SUBAGENTS_BIN: join(onPathDir, "subagents") }, from), join(onPathDir, "subagents"));
		// Elsewhere (a clone, a local path install): PATH, as before.
		const elsewhere = pathToFileURL(join(tmpdir(), `subagents-clone-${process.pid}`, "extension", "dist", "extension.js")).href;
		assert.equal(platformBinary(elsewhere), undefined);
		assert.equal(findBinary(undefined, env, elsewhere), join(onPathDir, "subagents"));
		assert.match(binarySearched(), new RegExp(`SUBAGENTS_BIN, ${platformPackage()}, PATH`));
	} finally {
		rmSync(root, { recursive: true, force: true });
	}
});

test("which release is newer: the extension upgrades only an older service", () => {
	const cases: Array<[string | undefined, string | undefined, boolean]> = [
		["0.1.1", "0.1.0", true],
		["0.1.0", "0.1.1", false],
		["0.1.0", "0.1.0", false],
		["0.10.0", "0.9.9", true],
		["1.0.0", "0.99.0", true],
		["0.2.0", "0.2.0-rc.1", true],
		["0.2.0-rc.1", "0.2.0", false],
		["0.2.0-rc.2", "0.2.0-rc.1", true],
		["0.1.0", "", true],
		["0.1.0", undefined, true],
		["", "0.1.0", false],
		["", "", false],
		["0.1", "0.1.0", false],
	];
	for (const [a, b, want] of cases) assert.equal(newerRelease(a, b), want, `newerRelease(${a}, ${b})`);
});

test("the extension's release is its package.json's; a binary's is what `subagents version --json` says", async (t) => {
	const dir = mkdtempSync(join(tmpdir(), "ext-release-"));
	t.after(() => rmSync(dir, { recursive: true, force: true }));
	assert.equal(ownVersion(dir), "");
	writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "x", version: "0.3.1" }));
	assert.equal(ownVersion(dir), "0.3.1");
	assert.match(ownVersion(), /^\d+\.\d+\.\d+/);

	const bin = join(dir, "subagents");
	writeFileSync(bin, `#!/bin/sh\n[ "$1 $2" = "version --json" ] && echo '{"version":"0.3.2","os":"linux"}'\n`, { mode: 0o755 });
	assert.equal(await releaseOf(bin), "0.3.2");
	const old = join(dir, "old");
	writeFileSync(old, "#!/bin/sh\necho 'unknown command: version' >&2\nexit 2\n", { mode: 0o755 });
	assert.equal(await releaseOf(old), "");
	assert.equal(await releaseOf(join(dir, "missing")), "");
});
