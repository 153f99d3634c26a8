// The fleet inside pi: what this session has delegated, as the
// `/subagents` command shows it.

import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { SubagentsCli } from "./cli.ts";
import type { Delivery } from "./delivery.ts";
import { listLine } from "./format.ts";

/** What the fleet needs of the extension that registers it. */
export interface FleetDeps {
	/** A client of the service; passive: one that does not start it. */
	cli: (passive?: boolean) => SubagentsCli;
	delivery: Delivery;
}

/** Registers `/subagents`: this session's delegations and sessions, and their state. */
export function registerFleet(pi: ExtensionAPI, deps: FleetDeps): void {
	pi.registerCommand("subagents", {
		description: "This session's delegations and sessions, and their state",
		handler: async (_args, ctx: ExtensionContext) => {
			const env = await deps.cli().call("list", ["--parent-session", deps.delivery.parent(ctx)]);
			const runs = env.runs ?? [];
			const lines = runs.length ? runs.map(listLine) : ["No delegations from this session yet."];
			const waiting = deps.delivery.running();
			if (waiting.length) lines.push(`Waiting in the background for: ${waiting.join(", ")}`);
			ctx.ui.notify(lines.join("\n"), "info");
		},
	});
}
