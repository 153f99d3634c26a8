/**
 * Test extension: after the run's last message, write settling.txt in the
 * cwd and hold pi for a minute before it settles. A test kills the worker in
 * that window: the child has finalized, but its worker never reports it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function slowSettle(pi: ExtensionAPI) {
	pi.on("agent_before_settle", async (_event, ctx) => {
		writeFileSync(join(ctx.cwd, "settling.txt"), String(process.pid));
		await new Promise((resolve) => setTimeout(resolve, 60_000));
		return undefined;
	});
}
