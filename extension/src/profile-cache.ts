// The profiles the service listed, remembered in its data dir per cwd, so
// that a pi starting while no service runs still registers the primary
// profiles' tools without starting a process, and a pi starting while it
// runs asks it again only when a folder or file of profiles has changed.

import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ProfileSummary } from "./format.ts";

// A user works in a few dozen folders at most; the oldest are forgotten.
const MAX_FOLDERS = 64;

/** A path the listing depends on, as the service saw it (Go: profiles.Watch). */
export interface Watch {
	path: string;
	/** Whole milliseconds; 0: it did not exist. */
	mtime_ms: number;
	/** A file's size. */
	size?: number;
}

function cachePath(dataDir: string): string {
	return join(dataDir, "cache", "profiles.json");
}

type Cache = Record<string, { at: number; profiles: ProfileSummary[]; watched?: Watch[] }>;

function read(dataDir: string): Cache {
	try {
		const c = JSON.parse(readFileSync(cachePath(dataDir), "utf8"));
		return c && typeof c === "object" ? c : {};
	} catch {
		return {};
	}
}

/**
 * Whether every path is as the service saw it when it listed: no folder
 * of profiles appeared or went, no file changed. Then the same listing
 * would come back, and nobody need ask. A few stats: far below a call.
 */
export function unchanged(watched: Watch[] | undefined): boolean {
	if (!watched?.length) return false;
	for (const w of watched) {
		const st = statSync(w.path, { throwIfNoEntry: false });
		if (!st) {
			if (w.mtime_ms !== 0) return false;
			continue;
		}
		if (Math.max(Math.floor(st.mtimeMs), 1) !== w.mtime_ms) return false;
		if (w.size !== undefined && !st.isDirectory() && st.size !== w.size) return false;
	}
	return true;
}

/** cwd's profiles as last listed, with what they depend on; undefined when they never were. */
export function rememberedProfiles(dataDir: string, cwd: string): { profiles: ProfileSummary[]; watched?: Watch[] } | undefined {
	return read(dataDir)[cwd];
}

/** Remembers cwd's profiles; a cache that cannot be written is only a cache. */
export function rememberProfiles(dataDir: string, cwd: string, profiles: ProfileSummary[], watched?: Watch[]): void {
	try {
		const cache = read(dataDir);
		cache[cwd] = { at: Date.now(), profiles, ...(watched?.length ? { watched } : {}) };
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
