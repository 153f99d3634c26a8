// The task tool's op "schedule": a delegation or plan on a timer, through
// `subagents schedule` (docs/schedules.md).

import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type SubagentsCli, SubagentsError } from "./cli.ts";
import type { Envelope } from "./format.ts";

/** The `schedule` parameter's description: the whole of its help, paid on every request. */
export const SCHEDULE_HELP = "schedule: {action: create|list|describe|pause|resume|trigger|update|delete, ...}";

/** Runs one schedule action; its envelope and the text the model reads. */
export async function scheduleOp(cli: SubagentsCli, ctx: ExtensionContext, schedule: unknown): Promise<{ env: Envelope; text: string }> {
	if (!schedule || typeof schedule !== "object") throw new SubagentsError("INVALID_INPUT", "schedule needs an object with an action");
	const env = await cli.call("schedule", [], [], { cwd: ctx.cwd, ...(schedule as Record<string, unknown>) });
	return { env, text: env.text ?? env.status ?? "" };
}
