// Where a command's text answer goes in each of pi's modes (docs/fleet.md,
// "Outside the terminal UI"; docs/doctor.md, "In pi"). ctx.ui.notify does
// nothing where pi has no UI (print and JSON runs), so a command that only
// notified answered nothing there.

import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";

/** customType of a command's answer in a JSON run: an entry of the session, which the model never reads. */
export const ANSWER_ENTRY_TYPE = "subagents-answer";

/** What a JSON run's entry holds: the command that answered, how it went, and its text. */
export interface AnswerEntry {
	command: string;
	level: "info" | "warning" | "error";
	text: string;
}

/**
 * Says a command's answer where pi lets it be read: in the terminal and in
 * RPC (hasUI) a notification, which the client shows; in a JSON run
 * (`pi --mode json`) an entry of the session (pi.appendEntry), which pi
 * prints on stdout as an entry_appended event and keeps out of the model's
 * context; in a print run (`pi -p`) stderr, since pi keeps stdout for the
 * model's answer (it sends what an extension writes there to stderr too).
 */
export function answer(pi: ExtensionAPI, ctx: ExtensionContext, command: string, text: string, level: AnswerEntry["level"] = "info"): void {
	if (ctx.hasUI) {
		ctx.ui.notify(text, level);
		return;
	}
	if (ctx.mode === "json") {
		pi.appendEntry<AnswerEntry>(ANSWER_ENTRY_TYPE, { command, level, text });
		return;
	}
	process.stderr.write(`${text}\n`);
}
