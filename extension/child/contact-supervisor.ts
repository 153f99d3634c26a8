/**
 * contact_supervisor: how a child pi run asks the agent that delegated its
 * task instead of guessing (the name and reasons are pi-subagents'). Loaded
 * only into child runs, with subagent_finalize (extension/embed.go joins
 * both files into the one module the worker loads with -e).
 *
 * The tool records nothing itself: the worker reads the call from the
 * child's session file when the run ends, and the session's workflow keeps
 * the question. A question (need_decision, interview_request) ends the run
 * here (terminate), so that nothing runs while it waits: not pi, not the
 * worker's activity, only a workflow timer. The answer, or QUESTION_TIMEOUT,
 * comes as the next user message of the same session, in a new run. A
 * worker that dies meanwhile loses nothing and the model is asked nothing
 * again. A progress update does not wait.
 *
 * Imports carry names of their own: embed.go joins this file to
 * subagent-finalize.ts, whose imports hold the plain names.
 */
import { Type as ContactType } from "typebox";
import type { ExtensionAPI as ContactAPI } from "@earendil-works/pi-coding-agent";

export const CONTACT_SUPERVISOR_TOOL = "contact_supervisor";

export default function contactSupervisor(pi: ContactAPI) {
	if (process.env.PI_SUBAGENT_CHILD !== "1") return;

	// A question was asked in this run: other tools wait for its answer.
	let asked = false;
	pi.on("agent_start", async () => {
		asked = false;
	});

	pi.on("tool_call", async (event) => {
		if (!asked || event.toolName === CONTACT_SUPERVISOR_TOOL || event.toolName === "subagent_finalize") return undefined;
		return {
			block: true,
			reason: "Your question waits for its answer: end your turn now; the answer comes as your next message.",
			terminate: true,
		};
	});

	pi.registerTool({
		name: CONTACT_SUPERVISOR_TOOL,
		label: "Contact supervisor",
		// pi runs the tool_call hooks of a parallel batch before any tool:
		// one at a time, a tool called after a question is refused.
		executionMode: "sequential",
		description:
			"Ask the agent that delegated your task instead of guessing. need_decision or interview_request: your run pauses and the answer comes as your next message. progress_update: a short note; carry on.",
		parameters: ContactType.Object({
			reason: ContactType.Union([
				ContactType.Literal("need_decision"),
				ContactType.Literal("interview_request"),
				ContactType.Literal("progress_update"),
			]),
			message: ContactType.String({ description: "The question, or the update" }),
		}),
		async execute(_toolCallId, params) {
			if (!params.message?.trim()) {
				throw new Error(`${CONTACT_SUPERVISOR_TOOL}: "message" must not be empty.`);
			}
			if (params.reason === "progress_update") {
				return {
					content: [{ type: "text", text: "Update recorded for your supervisor. Carry on with your task." }],
					details: { reason: params.reason },
				};
			}
			asked = true;
			return {
				content: [
					{
						type: "text",
						text: "Question recorded. Your run pauses here: the answer comes as your next message. Call no other tool now.",
					},
				],
				details: { reason: params.reason },
				terminate: true,
			};
		},
	});
}
