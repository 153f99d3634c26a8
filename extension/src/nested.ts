// Durable subagents for pi, in a child that delegates: the entry the
// worker loads (-e) into a child whose profile lists a delegation tool,
// while its depth is below the limit (docs/pi.md, "Nesting"). ../index.ts,
// the entry of a parent pi, registers nothing in a child; this one
// activates the same extension there. pi's --tools allowlist keeps only
// the delegation tools the profile listed; every delegation records the
// task's session (PI_SUBAGENT_PARENT_SESSION) as its parent, and each
// request carries that session with the worker's token for it
// (PI_SUBAGENT_TOKEN), from which the service takes the depth (cli.ts
// callerOf). Outside such a child it does nothing.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

export default async function durableSubagentsNested(pi: ExtensionAPI): Promise<void> {
	if (process.env.PI_SUBAGENT_CHILD !== "1" || process.env.PI_SUBAGENT_NESTED !== "1") return;
	const { activate } = await import("../dist/extension.js");
	activate(pi, { Type, loadTui: () => import("@earendil-works/pi-tui") });
}
