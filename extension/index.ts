// Durable subagents for pi: the entry pi loads.
//
// The extension itself is src/extension.ts, compiled to one JavaScript file
// (dist/extension.js, `make build`) that node loads natively: pi then
// transpiles nothing but this file, which keeps its start as fast as with no
// extension. TypeBox and pi-tui are pi's own, handed over from here, where
// pi resolves them.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

export default async function durableSubagents(pi: ExtensionAPI): Promise<void> {
	// A child run registers nothing: subagents do not delegate further.
	if (process.env.PI_SUBAGENT_CHILD === "1") return;
	const { activate } = await import("./dist/extension.js");
	activate(pi, { Type, loadTui: () => import("@earendil-works/pi-tui") });
}
