/**
 * subagent_finalize: how a child pi run hands its result back to the durable
 * subagents worker. Loaded only into child runs (`-e` by the worker, with
 * PI_SUBAGENT_CHILD=1); a parent never sees this tool.
 *
 * Contract (the sessions contract):
 * - status SUCCESS requires a non-empty `result`;
 * - status ERROR requires a non-empty `error` (`result` may hold partial findings);
 * - `verdict`, optional, is one word (a plan step that asks for one reads it);
 * - a violation is a tool error the model sees, so it can correct the call;
 * - after a valid call the run ends (terminate) and every further tool call is refused.
 */
import { Type } from "typebox";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export const FINALIZE_TOOL = "subagent_finalize";

export default function subagentFinalize(pi: ExtensionAPI) {
	if (process.env.PI_SUBAGENT_CHILD !== "1") return;

	let finalized = false;
	// A warm child (the worker's pool) is pointed at its task's session
	// file before its prompt: the result of one session never blocks the next.
	pi.on("session_start", async () => {
		finalized = false;
	});

	pi.on("tool_call", async (event) => {
		if (!finalized) return undefined;
		return {
			block: true,
			reason: `${FINALIZE_TOOL} was already called: the result is final and no further tool calls run. Stop now.`,
		};
	});

	pi.registerTool({
		name: FINALIZE_TOOL,
		label: "Finalize",
		description:
			"Hand your final result back to the agent that delegated this task. Call it exactly once, as your last action. " +
			'Use status "SUCCESS" with the complete answer in `result`, or status "ERROR" with what went wrong in `error` ' +
			"(and any partial findings in `result`). Plain assistant text is not returned to the caller.",
		parameters: Type.Object({
			status: Type.Union([Type.Literal("SUCCESS"), Type.Literal("ERROR")], {
				description: 'SUCCESS when the task is done, ERROR when it cannot be done',
			}),
			result: Type.Optional(Type.String({ description: "The final answer (required for SUCCESS)" })),
			error: Type.Optional(Type.String({ description: "What went wrong (required for ERROR)" })),
			verdict: Type.Optional(Type.String({ description: "One word, if the task asks for a verdict" })),
		}),
		async execute(_toolCallId, params) {
			if (finalized) {
				throw new Error(`${FINALIZE_TOOL} was already called; the first result stands.`);
			}
			if (params.status === "SUCCESS" && !params.result?.trim()) {
				throw new Error(
					`${FINALIZE_TOOL}: status "SUCCESS" requires a non-empty "result". Call ${FINALIZE_TOOL} again with your complete answer in "result".`,
				);
			}
			if (params.status === "ERROR" && !params.error?.trim()) {
				throw new Error(
					`${FINALIZE_TOOL}: status "ERROR" requires a non-empty "error". Call ${FINALIZE_TOOL} again saying what went wrong in "error".`,
				);
			}
			if (params.verdict !== undefined && /\s/.test(params.verdict.trim())) {
				throw new Error(
					`${FINALIZE_TOOL}: "verdict" must be one word. Call ${FINALIZE_TOOL} again with a one-word "verdict".`,
				);
			}
			finalized = true;
			return {
				content: [{ type: "text", text: "Result recorded. Your task is complete; stop now." }],
				details: { status: params.status },
				terminate: true,
			};
		},
	});
}
