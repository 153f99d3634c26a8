import assert from "node:assert/strict";
import { test } from "node:test";
import { deliveredIds, RESULT_MESSAGE_TYPE } from "../src/delivery.ts";
import {
	agentErrorMessage,
	childRan,
	cutAtBoundary,
	listLine,
	adoptedLine,
	delegateResult,
	type Envelope,
	failedResult,
	type Item,
	modelLabel,
	modelParts,
	primaryPrompt,
	primaryToolName,
	progressText,
	renderDelegation,
	renderTruncated,
	resultText,
	runId,
	strayHint,
	subagentErrorCode,
	subagentResult,
	summaryLine,
	taskDetails,
	taskTree,
	taskErrorCode,
	truncatedOutput,
	ZERO_USAGE,
} from "../src/format.ts";

function item(over: Partial<Item>): Item {
	return {
		task_id: "5b1c0f4e-0000-4000-8000-000000000001",
		index: 0,
		name: "scan",
		agent: "scout",
		status: "completed",
		done: true,
		output: "found it",
		output_available: true,
		output_truncated: false,
		output_total_chars: 8,
		output_returned_chars: 8,
		usage: { ...ZERO_USAGE, input: 100, output: 20, cost: 0.0001, turns: 1 },
		exit_code: 0,
		attempts: 1,
		provider: "scripted",
		model: "scripted-1",
		tool_count: 1,
		elapsed_ms: 12000,
		timeout_s: 600,
		...over,
	};
}

function envelope(items: Item[], over: Partial<Envelope> = {}): Envelope {
	return { contract_version: "subagents.v1", op: "wait", backend: "temporal", delegation_id: "delegation-019ac0de-5f00-7abc-8def-0c1d1a2b3c4d", done: true, items, ...over };
}

test("subagent result: the sessions contract header and the SingleResult contract details", () => {
	const r = subagentResult(envelope([item({ finalize: { status: "SUCCESS", result: "found it" }, tool_rows: [{ id: "c", name: "read", args: '{"path":"a.go"}', status: "ok" }] })]), "scout", "find");
	assert.equal(r.text, "**Status:** SUCCESS\n**Session ID:** `5b1c0f4e-0000-4000-8000-000000000001`\n\n---\n\nfound it");
	assert.equal(r.details.mode, "single");
	assert.equal(r.details.runId, "1a2b3c4d");
	assert.deepEqual(r.details.results[0].usage, { input: 100, output: 20, cacheRead: 0, cacheWrite: 0, cost: 0.0001, turns: 1 });
	assert.deepEqual(r.details.results[0].displayItems, [
		{ type: "toolCall", name: "read", args: { path: "a.go" } },
		{ type: "text", text: "found it" },
	]);
	assert.deepEqual(r.details.finalized, { status: "SUCCESS", result: "found it" });
	assert.deepEqual(r.details.delegationIds, ["delegation-019ac0de-5f00-7abc-8def-0c1d1a2b3c4d"]);
});

test("subagent result: failures keep the header, an unknown agent is the SingleResult contract's text", () => {
	const failed = subagentResult(
		envelope([item({ status: "timed_out", output: "half", error: { code: "SUBAGENT_TIMEOUT", message: "Timed out after 600s. Consider resuming with a longer timeout." } })]),
		"scout",
		"find",
	);
	assert.match(failed.text, /^\*\*Status:\*\* ERROR\n/);
	assert.match(failed.text, /Error \(SUBAGENT_TIMEOUT\): Timed out after 600s/);
	assert.match(failed.text, /Partial output:\nhalf/);
	assert.equal(failed.details.results[0].exitCode, 1, "a failed run has a non-zero exitCode");
	assert.equal(failed.details.error?.code, "SUBAGENT_TIMEOUT");

	const unknown = subagentResult(
		envelope([item({ status: "failed", output: "", error: { code: "UNKNOWN_AGENT", message: 'Unknown profile: "nope". Available profiles: scout, oracle' } })]),
		"nope",
		"x",
	);
	assert.equal(unknown.text, "Unknown agent: nope. Available agents: scout, oracle");
	assert.deepEqual(unknown.details.results, []);
	assert.equal(agentErrorMessage("other"), "other");
});

test("delegate summary lines (the delegate contract)", () => {
	const env = envelope([
		item({ name: "build-assets", task_id: "a3f7", agent: "default" }),
		item({ name: "run-tests", task_id: "f4e1", agent: "default", status: "timed_out", error: { code: "SUBAGENT_TIMEOUT", message: "Timed out after 300s. Consider resuming with a longer timeout." } }),
	]);
	const r = delegateResult(env);
	assert.equal(
		r.text,
		"✓ build-assets: completed (session: a3f7)\n✗ run-tests: error — Timed out after 300s. Consider resuming with a longer timeout. (session: f4e1)",
	);
	assert.deepEqual(r.details.sessionIds, ["a3f7", "f4e1"]);
	assert.equal(r.details.status, "done");
	assert.equal(summaryLine(item({ done: false, status: "running", agent: "default" })), "… scan: running (session: 5b1c0f4e-0000-4000-8000-000000000001)");
});

test("progress text: status header and condensed windows", () => {
	const env = envelope(
		[
			item({ name: "a", tool_rows: [{ id: "1", name: "ls", args: '{"path":"src/"}', status: "ok" }] }),
			item({ name: "b", done: false, status: "running", tool_count: 2, elapsed_ms: 3500 }),
			item({ name: "c", status: "failed", error: { code: "LOOP_DETECTED", message: "Loop detected: sub-agent is repeating the same tool calls" } }),
		],
		{ done: false },
	);
	assert.equal(
		progressText(env),
		[
			"Sub-agents: 1 running, 1 done, 1 error",
			"✓ a • scout (scripted/scripted-1) • 1 tools • 12s/600s",
			"  ✓ ls → src/",
			"⏳ b • scout (scripted/scripted-1) • 2 tools • 3s/600s",
			"✗ c • scout (scripted/scripted-1) • 1 tools • 12s/600s",
			"  Loop detected: sub-agent is repeating the same tool calls",
		].join("\n"),
	);
});

test("task details carry the task contract's envelope fields", () => {
	const d = taskDetails("wait", envelope([item({ output_truncated: true, output_total_chars: 9000, output_returned_chars: 8000 })], { wait_status: "completed" }), "primary-tool");
	assert.equal(d.contract_version, "task.v1");
	assert.equal(d.invocation, "primary-tool");
	assert.equal(d.wait_status, "completed");
	assert.equal(d.done, true);
	assert.equal(d.output_truncated, true);
	assert.equal(d.output_total_chars, 9000);
	assert.equal(d.items[0].subagent_type, "scout");
	assert.equal(d.backend, "temporal");
	assert.equal(runId(envelope([])), "1a2b3c4d");
});

test("a cancel of several ids keeps each item's cancel_applied and prior_status in the task tool's details", () => {
	const env = envelope(
		[
			item({ task_id: "a", status: "cancelled", cancel_applied: true, prior_status: "running" }),
			item({ task_id: "b", status: "completed", cancel_applied: false, prior_status: "completed" }),
		],
		{ cancel_applied: true },
	);
	const d = taskDetails("cancel", env, "task");
	assert.equal(d.cancel_applied, true);
	assert.deepEqual(
		d.items.map((it) => [it.task_id, it.cancel_applied, it.prior_status]),
		[
			["a", true, "running"],
			["b", false, "completed"],
		],
	);
});

test("the task tool speaks the task contract's error codes where that contract names one, and keeps the unified code", () => {
	const cases: Array<[string, string, string, string | undefined]> = [
		["start", "PERMISSION_DENIED", "task_permission_denied", "permission"],
		["status", "SESSION_NOT_FOUND", "task_expired", "not_found"],
		["wait", "CANCELLED", "task_wait_aborted", "runtime"],
		["cancel", "CANCELLED", "CANCELLED", undefined],
		["start", "UNKNOWN_AGENT", "UNKNOWN_AGENT", undefined],
		["start", "SUBAGENT_TIMEOUT", "SUBAGENT_TIMEOUT", undefined],
	];
	for (const [op, unified, code, category] of cases) assert.deepEqual(taskErrorCode(op, unified), category ? { code, category } : { code }, `${op} ${unified}`);
	const denied = item({ status: "failed", error: { code: "PERMISSION_DENIED", message: "Permission denied", category: "permission" } });
	const d = taskDetails("start", envelope([denied]), "task");
	assert.deepEqual(d.items[0].error, { code: "task_permission_denied", message: "Permission denied", category: "permission", unified_code: "PERMISSION_DENIED" });
	assert.equal(d.items[0].error_category, "permission");
});

test("primary tools: names and prompts", () => {
	const taken = new Set(["read", "task", "bash"]);
	assert.equal(primaryToolName("librarian", taken), "librarian");
	assert.equal(primaryToolName("task", taken), "task_subagent");
	taken.add("task_subagent");
	assert.equal(primaryToolName("task", taken), "task_subagent_2");
	assert.equal(primaryToolName("Code Reviewer!", taken), "code_reviewer");
	assert.equal(primaryPrompt("Review this", "It is a hot fix", ["a.go", "b.go"]), "Review this\n\nContext:\nIt is a hot fix\n\nFiles:\n- a.go\n- b.go");
	assert.equal(primaryPrompt("Where is auth?"), "Where is auth?");
});

test("delivered IDs come from tool results and delivery messages", () => {
	const ids = deliveredIds([
		{ type: "message", message: { role: "toolResult", details: { delegationIds: ["d-1"] } } },
		{ type: "message", message: { role: "assistant" } },
		{ type: "custom_message", customType: RESULT_MESSAGE_TYPE, details: { delegationId: "d-2" } },
		{ type: "custom_message", customType: "other", details: { delegationId: "d-3" } },
		{ type: "custom", customType: RESULT_MESSAGE_TYPE },
	]);
	assert.deepEqual([...ids].sort(), ["d-1", "d-2"]);
});

// A theme that shows where styles go, so the golden text checks them too.
const tagged = { fg: (color: string, s: string) => `<${color}>${s}</${color}>`, bold: (s: string) => `<b>${s}</b>` };
const plain = { fg: (_c: string, s: string) => s, bold: (s: string) => s };

test("delegate_to_subagents renders the delegate contract's windows: collapsed, expanded, the original timeout", () => {
	const windows = [
		{
			name: "scan",
			sessionId: "s-1",
			profile: "scout",
			provider: "openai",
			model: "gpt-5",
			thinking: "high",
			status: "running" as const,
			toolCount: 5,
			elapsedMs: 712_000,
			// Extended past its 600 s: the window still shows 600.
			timeout: 600,
			lines: ["✓ ls → src/", "✓ find → *.ts in src", "✓ read {\"path\":\"a.ts\"}", "✓ read {\"path\":\"b.ts\"}", "· grep {\"pattern\":\"auth\"}"],
		},
		{ name: "ghost", sessionId: "s-2", profile: "default", provider: "openai", model: "gpt-5", status: "error" as const, toolCount: 0, elapsedMs: 20, error: 'Unknown profile: "nope"', lines: [] },
	];
	assert.equal(
		renderDelegation(windows, { expanded: false, maxLines: 2, done: false }, tagged),
		[
			"Sub-agents: 1 running, 0 done, 1 error",
			"<warning>⏳</warning> <b>scan</b> • scout (openai/gpt-5 high) • 5 tools • 712s/600s",
			"<dim>  ... (3 more lines)</dim>",
			'<muted>  ✓ read {"path":"b.ts"}</muted>',
			'<muted>  · grep {"pattern":"auth"}</muted>',
			"<error>✗</error> <b>ghost</b> • default (openai/gpt-5) • 0 tools • 0s",
			'<error>  Unknown profile: "nope"</error>',
		].join("\n"),
	);
	const done = windows.map((w) => ({ ...w, status: w.status === "running" ? ("done" as const) : w.status }));
	assert.equal(
		renderDelegation(done, { expanded: true, maxLines: 2, done: true }, plain),
		[
			"Sub-agents: 0 running, 1 done, 1 error",
			"✓ scan • scout (openai/gpt-5 high) • 5 tools • 712s/600s",
			"  ✓ ls → src/",
			"  ✓ find → *.ts in src",
			'  ✓ read {"path":"a.ts"}',
			'  ✓ read {"path":"b.ts"}',
			'  · grep {"pattern":"auth"}',
			"✗ ghost • default (openai/gpt-5) • 0 tools • 0s",
			'  Unknown profile: "nope"',
			"Sessions: s-1, s-2",
		].join("\n"),
	);
});

test("the retrieval tools' truncating renderer: maxLinesPerWindow lines and the count of the rest", () => {
	const text = ["one", "two", "three", "four", "five"].join("\n");
	assert.equal(renderTruncated(text, { expanded: false, maxLines: 2 }, tagged), "one\ntwo\n<dim>... (3 more lines)</dim>");
	assert.equal(renderTruncated(text, { expanded: true, maxLines: 2 }, tagged), text);
	assert.equal(renderTruncated("short", { expanded: false, maxLines: 2 }, tagged), "short");
});

test("delegate_to_subagents' details hold each window's lines for the renderer", () => {
	const env = envelope([item({ tool_rows: [{ id: "1", name: "ls", args: '{"path":"src/"}', status: "ok" }], output: "found it\nin a.ts" })]);
	const w = delegateResult(env, 4).details.windows[0];
	assert.deepEqual(w.lines, ["✓ ls → src/", "found it", "in a.ts"]);
	assert.equal(resultText({ content: [{ type: "text", text: "a" }, { type: "image" }, { type: "text", text: "b" }] }), "a\nb");
});

test("/subagents lines: a one-task delegation reads as its delegation and its session", () => {
	const base = { execution_status: "running", open: true, started: "2026-11-25T10:00:00Z", status: "running", name: "stuck" };
	assert.equal(
		listLine({ ...base, id: "abc", kind: "session", delegation_id: "delegation-abc", ui_url: "http://ui/abc" }),
		"delegation delegation-abc · session abc · running · stuck\n  http://ui/abc",
	);
	assert.equal(listLine({ ...base, id: "abc", kind: "session", delegation_id: "delegation-xyz" }), "session abc · running · stuck");
	assert.equal(listLine({ ...base, id: "delegation-xyz", kind: "delegation" }), "delegation delegation-xyz · running · stuck");
});

test("the model shown is the one the task ran, as provider/id; an unknown one is never default/default", () => {
	assert.deepEqual(modelParts("scripted", "scripted-1"), { provider: "scripted", model: "scripted-1", label: "scripted/scripted-1" });
	assert.deepEqual(modelParts("default", "scripted/scripted-1"), { provider: "scripted", model: "scripted-1", label: "scripted/scripted-1" }, "the whole reference in model");
	assert.deepEqual(modelParts("scripted", "scripted/scripted-1"), { provider: "scripted", model: "scripted-1", label: "scripted/scripted-1" });
	assert.deepEqual(modelParts("openrouter", "meta/llama-4"), { provider: "openrouter", model: "meta/llama-4", label: "openrouter/meta/llama-4" });
	assert.deepEqual(modelParts("default", "gpt-5"), { model: "gpt-5", label: "gpt-5" });
	assert.deepEqual(modelParts("default", "default"), {});
	assert.deepEqual(modelParts("", ""), {});
	assert.equal(modelLabel(item({ provider: "default", model: "default" })), undefined);

	const unknown = envelope([item({ provider: "default", model: "default", done: false, status: "running" })], { done: false });
	assert.equal(progressText(unknown).split("\n")[1], "⏳ scan • scout • 1 tools • 12s/600s", "no model named while nobody knows it");
	assert.doesNotMatch(JSON.stringify(delegateResult(unknown).details), /default\/default|"default"/);
	assert.equal(taskDetails("start", unknown, "task").model, undefined);
	const ran = envelope([item({ provider: "default", model: "scripted/scripted-1" })]);
	assert.equal(progressText(ran).split("\n")[1], "✓ scan • scout (scripted/scripted-1) • 1 tools • 12s/600s");
	assert.equal(taskDetails("start", ran, "task").provider, "scripted");
	assert.equal(taskDetails("start", ran, "task").model, "scripted-1");
	assert.equal(subagentResult(ran, "scout", "x").details.results[0].model, "scripted/scripted-1");
});

test("a cancelled task reads as cancelled everywhere, never as an error of a running task", () => {
	const cancelledItem = item({ status: "cancelled", output: "", error: { code: "CANCELLED", message: "Cancelled while running", category: "runtime" } });
	const env = envelope([cancelledItem]);
	const r = subagentResult(env, "scout", "find");
	assert.match(r.text, /^\*\*Status:\*\* CANCELLED\n/);
	assert.match(r.text, /Task cancelled \(Cancelled while running\)/);
	assert.doesNotMatch(r.text, /status running|ERROR/);
	assert.equal(r.details.status, "cancelled");
	assert.deepEqual(r.details.error, { code: "SUBAGENT_FAILED", message: "Cancelled while running", unified_code: "CANCELLED" });
	assert.equal(summaryLine(cancelledItem), "⊘ scan: cancelled — Cancelled while running (session: 5b1c0f4e-0000-4000-8000-000000000001) (profile: scout, model: scripted/scripted-1)");
	assert.equal(progressText(env).split("\n")[0], "Sub-agents: 0 running, 0 done, 0 error, 1 cancelled");
	assert.equal(delegateResult(env).details.windows[0].status, "cancelled");
	assert.match(taskTree(cancelledItem), /^⊘ Scout · scan .*\n  ╰── Task cancelled: Cancelled while running$/);
	assert.equal(taskDetails("start", env, "task").status, "cancelled");
	assert.match(
		renderDelegation(delegateResult(env).details.windows, { expanded: false, maxLines: 3, done: true }, tagged),
		/<warning>⊘<\/warning> <b>scan<\/b>/,
	);
});

test("a result is an error for pi when a task in it ended without its answer, or a wait gave up", () => {
	assert.equal(failedResult(envelope([item({})])), false);
	assert.equal(failedResult(envelope([item({}), item({ status: "failed", error: { code: "UNKNOWN_AGENT", message: "Unknown profile" } })])), true);
	assert.equal(failedResult(envelope([item({ status: "timed_out" })])), true);
	assert.equal(failedResult(envelope([item({ status: "cancelled" })])), true);
	assert.equal(failedResult(envelope([item({ status: "terminated" })])), true);
	assert.equal(failedResult(envelope([item({ finalize: { status: "ERROR", error: "could not" } })])), true, "a child that finalized with ERROR");
	assert.equal(failedResult(envelope([item({ done: false, status: "running" })], { done: false })), false, "an async start is no failure");
	assert.equal(failedResult(envelope([item({ done: false, status: "running" })], { done: false, wait_status: "timeout" })), true);
});

test("the start's hint about results of other sessions: how many, from when, how to take them", () => {
	const now = new Date(2026, 10, 26, 9, 0);
	const at = new Date(2026, 10, 26, 4, 12).toISOString();
	assert.equal(
		strayHint({ sessions: [{ id: "s1", open: 1, running: 0 }], open: 1, running: 0, latest: at }, now),
		"subagents: 1 delegation of an earlier pi session in this folder waits for nobody (the latest started today 04:12): /subagents-adopt takes its result into this session",
	);
	assert.equal(
		strayHint(
			{
				sessions: [
					{ id: "s1", open: 2, running: 1 },
					{ id: "s2", open: 1, running: 0 },
				],
				open: 3,
				running: 1,
				latest: new Date(2026, 10, 24, 18, 5).toISOString(),
			},
			now,
		),
		"subagents: 3 delegations of 2 earlier pi sessions in this folder wait for nobody (the latest started 2026-11-24 18:05, 1 still running): /subagents-adopt takes their results into this session",
	);
	assert.equal(adoptedLine(2, 1, ["s1"]), "subagents: took 2 delegations of s1 into this session; 1 still running, its result comes when done");
	assert.match(adoptedLine(0, 0, []), /^subagents: nothing to take/);
});

test("a tool result holds a delegation as received only once its work is done", () => {
	// An async start, or a wait that broke when the service went away,
	// returns work still running: a later start of the session must still
	// deliver its result (it is not in the session yet).
	const running = envelope([item({ done: false, status: "running" })], { done: false });
	assert.deepEqual(taskDetails("start", running, "task").delegationIds, []);
	assert.deepEqual(delegateResult(running).details.delegationIds, []);
	assert.deepEqual(subagentResult(running, "scout", "x").details.delegationIds, []);
	const done = envelope([item({})]);
	assert.deepEqual(taskDetails("start", done, "task").delegationIds, ["delegation-019ac0de-5f00-7abc-8def-0c1d1a2b3c4d"]);
	assert.deepEqual(delegateResult(done).details.delegationIds, ["delegation-019ac0de-5f00-7abc-8def-0c1d1a2b3c4d"]);
	assert.deepEqual(subagentResult(done, "scout", "x").details.delegationIds, ["delegation-019ac0de-5f00-7abc-8def-0c1d1a2b3c4d"]);
});

test("runId names one execution: runs of the same minute differ, as the SingleResult contract's 8-character ID", () => {
	// Three delegations started within the same millisecond: a UUIDv7 begins with its time.
	const ids = ["019ac0de-5f00-7abc-8def-0c1d1a2b3c4d", "019ac0de-5f00-7abd-9123-45670f0e0d0c", "019ac0de-5f00-7abe-a9b8-c7d6e5f4a3b2"];
	const runs = ids.map((id) => runId(envelope([item({})], { delegation_id: `delegation-${id}` })));
	assert.deepEqual(runs, ["1a2b3c4d", "0f0e0d0c", "e5f4a3b2"]);
	// A turn queued behind a running one has no delegation: its session and turn name it.
	const queued = (turn: number) => runId(envelope([item({ turn })], { delegation_id: undefined, task_id: "5b1c" }));
	assert.match(queued(2) ?? "", /^[0-9a-f]{8}$/);
	assert.notEqual(queued(2), queued(3));
	assert.equal(queued(2), queued(2));
	assert.equal(runId(envelope([], { delegation_id: undefined })), undefined);
	assert.equal(subagentResult(envelope([item({})], { delegation_id: `delegation-${ids[1]}` }), "scout", "x").details.runId, "0f0e0d0c");
});

test("the subagent tool's details.error.code is always one of the SingleResult contract's codes, ours beside it", () => {
	const contract = ["INVALID_INPUT", "SUBAGENTS_DISABLED", "UNKNOWN_AGENT", "SUBAGENT_DISABLED", "SUBAGENT_DEPTH_EXCEEDED", "SUBAGENT_TIMEOUT", "SUBAGENT_FAILED", "SUBAGENT_OUTPUT_TRUNCATED"];
	for (const c of contract) assert.equal(subagentErrorCode(c), c, `${c} is the contract's own`);
	const ours: Array<[string, string]> = [
		["SESSION_NOT_FOUND", "INVALID_INPUT"],
		["SESSION_RUNNING", "INVALID_INPUT"],
		["FINALIZE_MISSING", "SUBAGENT_FAILED"],
		["LOOP_DETECTED", "SUBAGENT_FAILED"],
		["CANCELLED", "SUBAGENT_FAILED"],
		["PERMISSION_DENIED", "SUBAGENT_DISABLED"],
		["SERVICE_UNAVAILABLE", "SUBAGENT_FAILED"],
		["TERMINATED", "SUBAGENT_FAILED"],
		["A_CODE_FROM_A_NEWER_SERVICE", "SUBAGENT_FAILED"],
	];
	for (const [code, want] of ours) assert.equal(subagentErrorCode(code), want, code);
	const missing = item({ status: "failed", output: "half", error: { code: "FINALIZE_MISSING", message: "no finalize", category: "runtime" } });
	const r = subagentResult(envelope([missing]), "scout", "x");
	assert.deepEqual(r.details.error, { code: "SUBAGENT_FAILED", message: "no finalize", unified_code: "FINALIZE_MISSING" });
	assert.match(r.text, /Error \(FINALIZE_MISSING\): no finalize/, "the text keeps our code for the model");
	const refused = subagentResult(envelope([], { error: { code: "SESSION_NOT_FOUND", message: "no session x" } }), "scout", "x");
	assert.deepEqual(refused.details.error, { code: "INVALID_INPUT", message: "no session x", unified_code: "SESSION_NOT_FOUND" });
});

test("a cut output: the text is cut where a word ends, with the contract's marker; results[0].output is whole", () => {
	const full = `${"alpha beta gamma\n".repeat(5)}delta epsilonzeta`;
	// The service kept 40 characters: "...\nalpha beta gamma\nalpha be" (mid-word).
	const cut = Array.from(full).slice(0, 40).join("");
	const it = item({ output: cut, output_truncated: true, output_total_chars: full.length, output_returned_chars: 40, finalize: { status: "SUCCESS", result: cut }, error: { code: "SUBAGENT_OUTPUT_TRUNCATED", message: "Output truncated to 40 of 102 characters" } });
	const r = subagentResult(envelope([it]), "scout", "x", full);
	assert.equal(r.details.results[0].output, full, "the whole sanitized output");
	assert.equal(r.details.finalized?.result, full);
	const body = r.text.split("---\n\n")[1];
	assert.equal(body, "alpha beta gamma\nalpha beta gamma\n[TRUNCATED: showing first 2 of 6 lines, 33B of 102B]");
	assert.equal(r.details.error?.code, "SUBAGENT_OUTPUT_TRUNCATED", "the contract's truncation indicator");
	assert.equal(r.details.results[0].error, undefined, "a cut output is no failed execution");
	assert.equal(r.details.results[0].exitCode, 0);
	// Without the full output (its file gone): the cut one, at a word's end, counted in characters.
	assert.equal(truncatedOutput(it), "alpha beta gamma\nalpha beta gamma\n[TRUNCATED: showing first 33 of 102 characters]");
	assert.equal(truncatedOutput(item({ output: "short" })), "short", "an output the service did not cut is shown whole");
	// A line break in the kept half wins; else a space; one long token is cut at the cap.
	assert.equal(cutAtBoundary("one two three four", 12), "one two");
	assert.equal(cutAtBoundary("x".repeat(30), 10), "x".repeat(10));
	assert.equal(cutAtBoundary("héllo wörld ünïcode", 13), "héllo wörld", "code points, as the service counts them");
	assert.equal(cutAtBoundary("fits", 10), "fits");
});

test("an ERROR finalize keeps its error in finalized; a task that never ran has no SingleResult", () => {
	const failed = item({ status: "failed", output: "could not\n\npartial", finalize: { status: "ERROR", error: "could not", result: "partial" }, error: { code: "SUBAGENT_FAILED", message: "could not" } });
	assert.deepEqual(subagentResult(envelope([failed]), "scout", "x").details.finalized, { status: "ERROR", error: "could not", result: "partial" });
	const bare = item({ status: "failed", finalize: { status: "ERROR", error: "no access" }, error: { code: "SUBAGENT_FAILED", message: "no access" } });
	assert.deepEqual(subagentResult(envelope([bare]), "scout", "x").details.finalized, { status: "ERROR", error: "no access" });
	assert.deepEqual(subagentResult(envelope([item({ finalize: { status: "SUCCESS", result: "found it" } })]), "scout", "x").details.finalized, { status: "SUCCESS", result: "found it" });

	// A profile the policy denies: refused before any child ran.
	const denied = item({ status: "failed", output: "", attempts: undefined, session_file: undefined, usage: { ...ZERO_USAGE }, error: { code: "PERMISSION_DENIED", message: "Permission denied: subagent \"scout\"", category: "permission" } });
	assert.equal(childRan(denied), false);
	const r = subagentResult(envelope([denied]), "scout", "x");
	assert.deepEqual(r.details.results, [], "no execution, so no exitCode");
	assert.equal(r.details.runId, undefined);
	assert.deepEqual(r.details.error, { code: "SUBAGENT_DISABLED", message: 'Permission denied: subagent "scout"', unified_code: "PERMISSION_DENIED" });
	const ran = subagentResult(envelope([item({ status: "failed", exit_code: 0, error: { code: "SUBAGENT_FAILED", message: "400" } })]), "scout", "x");
	assert.equal(ran.details.results[0].exitCode, 1, "a child that ran and failed has a non-zero exitCode");
	assert.equal(childRan(item({ done: false, status: "running", attempts: undefined })), true);
});

test("delegate summary lines carry the profile info: the profile named and the model it ran", () => {
	assert.equal(summaryLine(item({ name: "map", task_id: "a3f7" })), "✓ map: completed (session: a3f7) (profile: scout, model: scripted/scripted-1)");
	assert.equal(summaryLine(item({ name: "map", task_id: "a3f7", thinking: "high" })), "✓ map: completed (session: a3f7) (profile: scout, model: scripted/scripted-1:high)");
	assert.equal(
		summaryLine(item({ name: "ghost", task_id: "b", agent: "nope", provider: "default", model: "default", status: "failed", error: { code: "UNKNOWN_AGENT", message: 'Unknown profile: "nope". Available profiles: scout' } })),
		'✗ ghost: error — Unknown profile: "nope". Available profiles: scout (session: b) (profile: nope)',
	);
	assert.equal(summaryLine(item({ name: "map", task_id: "a3f7", agent: "default" })), "✓ map: completed (session: a3f7)", "no profile named: the contract's plain line");
});
