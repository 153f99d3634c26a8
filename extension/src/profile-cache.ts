// The profiles the service listed, remembered in its data dir per cwd, so
// that a pi starting while no service runs still registers the primary
// profiles' tools without starting a process.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ProfileSummary } from "./format.ts";

// A user works in a few dozen folders at most; the oldest are forgotten.
const MAX_FOLDERS = 64;

function cachePath(dataDir: string): string {
	return join(dataDir, "cache", "profiles.json");
}

type Cache = Record<string, { at: number; profiles: ProfileSummary[] }>;

function read(dataDir: string): Cache {
	try {
		const c = JSON.parse(readFileSync(cachePath(dataDir), "utf8"));
		return c && typeof c === "object" ? c : {};
	} catch {
		return {};
	}
}

/** cwd's profiles as last listed; undefined when they never were. */
export function rememberedProfiles(dataDir: string, cwd: string): ProfileSummary[] | undefined {
	return read(dataDir)[cwd]?.profiles;
}

/** Remembers cwd's profiles; a cache that cannot be written is only a cache. */
export function rememberProfiles(dataDir: string, cwd: string, profiles: ProfileSummary[]): void {
	try {
		const cache = read(dataDir);
		cache[cwd] = { at: Date.now(), profiles };
		const keep = Object.entries(cache)
			.sort((a, b) => b[1].at - a[1].at)
			.slice(0, MAX_FOLDERS);
		const path = cachePath(dataDir);
		mkdirSync(join(dataDir, "cache"), { recursive: true, mode: 0o700 });
		writeFileSync(path + ".tmp", JSON.stringify(Object.fromEntries(keep)), { mode: 0o600 });
		renameSync(path + ".tmp", path);
	} catch {
		/* the next listing tries again */
	}
}
