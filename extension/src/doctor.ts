// `/subagents-doctor`: `subagents doctor` from inside pi (docs/doctor.md).

import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { SubagentsCli } from "./cli.ts";

/** Registers `/subagents-doctor`. */
export function registerDoctor(pi: ExtensionAPI, cli: (passive?: boolean) => SubagentsCli): void {
	pi.registerCommand("subagents-doctor", {
		description: "Check what durable subagents need here, each with a verdict and its fix",
		handler: async (_args, ctx: ExtensionContext) => {
			const env = await cli(true).call("doctor", ["--cwd", ctx.cwd]);
			ctx.ui.notify(env.text ?? "", "info");
		},
	});
}
