// `/subagents-doctor`: `subagents doctor` from inside pi (docs/doctor.md).
// The command runs as a process of its own, never through the local
// service's socket as the tools' calls do: the doctor has to answer when
// the service is what is broken, and must not start it.

import { spawn } from "node:child_process";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { answer } from "./answer.ts";
import { type SubagentsCli, SubagentsError } from "./cli.ts";
import { binarySearched, buildAdvice, findBinary } from "./service.ts";

export type DoctorStatus = "ok" | "warn" | "fail" | "skip";

/** One check of `subagents doctor --json`. */
export interface DoctorCheck {
	name: string;
	status: DoctorStatus;
	verdict: string;
	fix?: string;
	details?: Record<string, unknown>;
}

/** The document `subagents doctor --json` prints. */
export interface DoctorReport {
	status: "ok" | "warn" | "fail";
	exit_code: number;
	summary: { ok: number; warn: number; fail: number; skip: number };
	context: { cwd: string; data_dir: string; address: string; namespace: string; task_queues: string[]; local: boolean };
	checks: DoctorCheck[];
}

/**
 * The doctor's deadline, passed as its --timeout: it runs its checks side
 * by side within it, and a check still running then comes out saying it
 * did not answer, so that the verdicts arrive even when something hangs
 * (what a user runs the doctor for). 30 s hold its slowest lane's bounds
 * (docs/doctor.md, "Deadline").
 */
export const DOCTOR_DEADLINE_S = 30;

/**
 * When the command is stopped: its deadline, and a margin for what comes
 * after it, which is bounded too: the half second a check that ran out has
 * to hand in what it found, and the process's start and its printing of
 * the document (well under a second each on a loaded machine). A doctor
 * still running then is itself hung, and is stopped.
 */
export const DOCTOR_STOP_MS = DOCTOR_DEADLINE_S * 1000 + 15_000;

/** The command's arguments: the folder, and where this pi's delegations go. */
export function doctorArgs(cwd: string, cli: SubagentsCli): string[] {
	const args = ["doctor", "--json", "--cwd", cwd, "--timeout", `${DOCTOR_DEADLINE_S}s`, ...cli.options.connection];
	const local = cli.options.local;
	if (local) {
		if (local.taskQueue && !args.includes("--task-queue")) args.push("--task-queue", local.taskQueue);
		args.push("--data-dir", local.dataDir);
	}
	return args;
}

/**
 * Runs `subagents doctor --json` as bin and reads its document (it exits
 * non-zero when a check fails); stops it after stopMs.
 */
export function runDoctor(bin: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, stopMs = DOCTOR_STOP_MS): Promise<DoctorReport> {
	return new Promise((resolve, reject) => {
		const child = spawn(bin, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		let err = "";
		const timer = setTimeout(() => child.kill("SIGTERM"), stopMs);
		child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
		child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
		child.on("error", (e: NodeJS.ErrnoException) => {
			clearTimeout(timer);
			reject(new SubagentsError("SERVICE_UNAVAILABLE", `could not run ${bin}: ${e.message}`));
		});
		child.on("close", (code, signal) => {
			clearTimeout(timer);
			try {
				const report = JSON.parse(out) as DoctorReport;
				if (Array.isArray(report.checks)) return resolve(report);
			} catch {
				/* not the document: said below */
			}
			const why = signal ? `was stopped (${signal}) after ${stopMs / 1000} s` : `exited ${code}`;
			reject(new SubagentsError("SUBAGENT_FAILED", `subagents doctor ${why}: ${err.trim() || out.trim() || "no output"}`));
		});
	});
}

const MARK: Record<DoctorStatus, string> = { ok: "✓", warn: "!", fail: "✗", skip: "–" };

/** The report as pi shows it: the totals, then each check's verdict and, under a failure or warning, its fix. */
export function formatReport(r: DoctorReport): { text: string; level: "info" | "warning" | "error" } {
	const s = r.summary;
	const lines = [`subagents doctor: ${s.fail} failed, ${s.warn} ${s.warn === 1 ? "warning" : "warnings"}, ${s.ok} ok, ${s.skip} skipped (${r.context.cwd})`];
	for (const c of r.checks) {
		lines.push(`${MARK[c.status] ?? "?"} ${c.name}: ${c.verdict}`);
		if (c.fix && (c.status === "fail" || c.status === "warn")) lines.push(`    fix: ${c.fix}`);
	}
	const level = s.fail > 0 ? "error" : s.warn > 0 ? "warning" : "info";
	return { text: lines.join("\n"), level };
}

/** Registers `/subagents-doctor`. */
export function registerDoctor(pi: ExtensionAPI, cli: (passive?: boolean) => SubagentsCli): void {
	pi.registerCommand("subagents-doctor", {
		description: "Check what durable subagents need here, each with a verdict and its fix",
		handler: async (_args, ctx: ExtensionContext) => {
			const c = cli(true);
			const base = c.options.env ?? process.env;
			// The command finds the local service's key and lock in the data
			// dir the settings name, as the tools' calls do.
			const dir = c.options.local?.dataDir;
			const env = dir ? { ...base, SUBAGENTS_DATA_DIR: dir } : base;
			const bin = findBinary(c.options.bin === "subagents" ? undefined : c.options.bin, env);
			// In every mode: a notification, a JSON run's entry, a print run's stderr.
			if (!bin) {
				answer(pi, ctx, "subagents-doctor", `the subagents command was not found (${binarySearched()}): ${buildAdvice()}`, "error");
				return;
			}
			try {
				const { text, level } = formatReport(await runDoctor(bin, doctorArgs(ctx.cwd, c), env, ctx.cwd));
				answer(pi, ctx, "subagents-doctor", text, level);
			} catch (e) {
				answer(pi, ctx, "subagents-doctor", (e as Error).message, "error");
			}
		},
	});
}
