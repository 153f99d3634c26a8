#!/usr/bin/env node
// The `subagents` command of the npm package: runs the binary of this
// machine's platform package (an optional dependency npm installed beside
// this one), with the same arguments, and exits as it does.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const pkg = `@durable-pi/subagents-${process.platform}-${process.arch}`;
let bin;
try {
	bin = join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), "bin", "subagents");
} catch {
	console.error(`subagents: ${pkg} is not installed: this platform has no release, or npm skipped optional dependencies (reinstall without --omit=optional)`);
	process.exit(127);
}
const r = spawnSync(bin, process.argv.slice(2), { stdio: "inherit" });
if (r.error) {
	console.error(`subagents: ${bin}: ${r.error.message}`);
	process.exit(127);
}
process.exit(r.status ?? 1);
