// The fleet view and widget (docs/fleet.md): golden renders at 80 and 120
// columns, and the view driven by keys against a recorded source.
// UPDATE_GOLDEN=1 rewrites the golden files from the renders.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";
import * as tui from "@earendil-works/pi-tui";
import { SubagentsError, type SubagentsCli } from "../src/cli.ts";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import type { Delivery } from "../src/delivery.ts";
import { registerFleet, schedulesOf } from "../src/fleet.ts";
import { FleetView, type FleetSource } from "../src/fleet-ui.ts";
import {
	type Canvas,
	detailView,
	type FleetData,
	fleetRows,
	PLAIN,
	type Paint,
	renderDetail,
	renderList,
	renderSchedule,
	renderWidget,
	rowLine,
	rowTime,
	type FleetRow,
	type ScheduleItem,
} from "../src/fleet-view.ts";
import { FleetWidget, ourProgress } from "../src/fleet-widget.ts";
import { stderrOf } from "./stderr.ts";
import type { Envelope, Item, ListItem } from "../src/format.ts";

// A schedule's run is named by its fire time, in local time: the tests' is UTC.
process.env.TZ = "UTC";

const here = dirname(fileURLToPath(import.meta.url));
const NOW = Date.parse("2026-03-02T10:00:00Z");
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();
const id = (n: number) => `0199a3c2-7d10-7000-8000-0000000000${String(n).padStart(2, "0")}`;

function run(over: Partial<ListItem> & { id: string }): ListItem {
	return { kind: "session", execution_status: "running", open: true, started: ago(10), ...over };
}

/** This session: a one-task delegation running, a finished one, a two-task delegation, a plan; the folder: another session's run; two schedules. */
const DATA: FleetData = {
	mine: [
		run({ id: id(1), delegation_id: `delegation-${id(1)}`, name: "done-task", agent: "scout", status: "completed", execution_status: "completed", started: ago(300), closed: ago(296), open: false, ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/${id(1)}` }),
		run({ id: id(2), delegation_id: `delegation-${id(2)}`, name: "send-target", agent: "scout", status: "running", started: ago(12), ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/${id(2)}` }),
		run({ id: id(3), delegation_id: `delegation-${id(3)}`, name: "cancel-target", agent: "worker", status: "running", started: ago(8) }),
		run({ id: `delegation-${id(4)}`, kind: "delegation", status: "running", started: ago(75) }),
		run({ id: id(5), delegation_id: `delegation-${id(4)}`, name: "map the modules", agent: "explorer", status: "completed", execution_status: "running", started: ago(75), closed: ago(40) }),
		run({ id: id(6), delegation_id: `delegation-${id(4)}`, name: "find every caller of the config loader across the whole repository", agent: "scout", status: "running", started: ago(74) }),
		run({ id: `plan-${id(7)}`, kind: "delegation", name: "scout-implement-review", status: "failed", execution_status: "completed", started: ago(7200), closed: ago(6900), open: false }),
	],
	folder: [
		run({ id: id(2), delegation_id: `delegation-${id(2)}`, name: "send-target", agent: "scout", status: "running", started: ago(12) }),
		run({ id: id(8), delegation_id: `delegation-${id(8)}`, name: "nightly review", agent: "reviewer", status: "cancelled", execution_status: "cancelled", started: ago(90000), closed: ago(89000), open: false, parent_session_id: "other-session" }),
	],
	schedules: [
		{ id: "nightly-review", name: "review the day's changes", spec: "cron 0 2 * * *", kind: "delegation", paused: false, next_fires: [ago(-300)], fires: 12 },
		{ id: "weekly-deps", spec: "every 1w", paused: true, fires: 3 },
	],
};

function item(over: Partial<Item> & { task_id: string }): Item {
	return {
		index: 0,
		agent: "scout",
		status: "running",
		done: false,
		output: "",
		output_available: false,
		output_truncated: false,
		output_total_chars: 0,
		output_returned_chars: 0,
		usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0, turns: 0 },
		exit_code: 0,
		provider: "scripted",
		model: "scripted-1",
		tool_count: 0,
		elapsed_ms: 0,
		...over,
	};
}

const STATUS: Envelope = {
	contract_version: "subagents.v1",
	op: "status",
	backend: "temporal",
	delegation_id: `delegation-${id(4)}`,
	status: "running",
	done: false,
	ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/delegation-${id(4)}`,
	items: [
		item({ task_id: id(5), name: "map the modules", agent: "explorer", status: "completed", done: true, output: "three modules: api, client, worker", elapsed_ms: 35000, tool_count: 2 }),
		item({
			task_id: id(6),
			index: 1,
			name: "find every caller of the config loader across the whole repository",
			tool_count: 3,
			elapsed_ms: 74000,
			tool_rows: [
				{ id: "1", name: "grep", args: '{"pattern":"LoadConfig"}', status: "done" },
				{ id: "2", name: "read", args: '{"path":"config/load.go"}', status: "done" },
				{ id: "3", name: "bash", args: '{"command":"go list ./..."}', status: "running" },
			],
			last_text: "Three callers so far; checking the tests next.",
			nested: [run({ id: id(9), name: "check the tests", agent: "scout", status: "running" })],
			ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/${id(6)}`,
		}),
	],
};

/** A delegation of n tasks, each with four tool rows and its last words (six lines each on the run's screen). */
function manyTasks(n: number): Envelope {
	return {
		...STATUS,
		delegation_id: `delegation-${id(90)}`,
		items: Array.from({ length: n }, (_, i) =>
			item({
				task_id: id(20 + i),
				index: i,
				name: `check package ${i}`,
				status: i < 3 ? "completed" : "running",
				done: i < 3,
				output: i < 3 ? `package ${i} is clean` : "",
				tool_count: 4,
				elapsed_ms: 30_000 + i * 1000,
				tool_rows: ["ls", "read", "grep", "bash"].map((name, k) => ({ id: String(k), name, args: `{"path":"pkg${i}/${name}.go"}`, status: k < 3 || i < 3 ? "done" : "running" })),
				last_text: i < 3 ? undefined : `Reading package ${i}.`,
				ui_url: `http://127.0.0.1:8233/namespaces/default/workflows/${id(20 + i)}`,
			}),
		),
	};
}

const MANY: FleetData = { mine: [run({ id: `delegation-${id(90)}`, kind: "delegation", name: "check every package", status: "running", started: ago(200) })], folder: [], schedules: [] };

/** A schedule as `schedule describe` answers: next fires and recent runs. */
const DESCRIBED: ScheduleItem = {
	...DATA.schedules[0],
	cwd: "/home/me/project",
	overlap: "skip",
	catchup: "1h0m0s",
	note: "the day's commits",
	next_fires: [ago(-300), ago(-86700), ago(-173100)],
	missed: 1,
	runs: [
		{ id: "nightly-review-2026-03-02T02:00:00Z", delegation_id: `delegation-${id(31)}`, status: "completed", fired: ago(28800), summary: "two changes need a test", result_id: "r1", delivered: true },
		{ id: "nightly-review-2026-03-01T02:00:00Z", delegation_id: `delegation-${id(32)}`, status: "failed", fired: ago(115200), error: { code: "SUBAGENT_TIMEOUT", message: "the reviewer ran out of time" }, result_id: "r2" },
	],
	ui_url: "http://127.0.0.1:8233/namespaces/default/schedules/nightly-review",
};

const TRANSCRIPT = ["[user]: Find every caller of the config loader.", "[assistant]: Looking for LoadConfig.", "→ grep: {\"pattern\":\"LoadConfig\"}", "[tool result]: config/load.go:12", "[assistant]: Three callers so far; checking the tests next."].join("\n");

function canvas(width: number, paint: Paint = PLAIN): Canvas {
	return { kit: tui, paint, width, now: NOW };
}

/** Compares lines with the golden file name (UPDATE_GOLDEN=1 writes it), and that none is wider than width. */
function golden(name: string, lines: string[], width: number) {
	for (const l of lines) assert.ok(tui.visibleWidth(l) <= width, `a line of ${name} is wider than ${width}: ${JSON.stringify(l)}`);
	// pi-tui's cuts reset styles before the ellipsis: the golden file is the text.
	const text = lines.map((l) => l.replace(/\x1b\[[0-9;]*m/g, "").trimEnd()).join("\n") + "\n";
	const file = join(here, "testdata", name);
	if (process.env.UPDATE_GOLDEN === "1" || !existsSync(file)) {
		mkdirSync(dirname(file), { recursive: true });
		writeFileSync(file, text);
		if (process.env.UPDATE_GOLDEN !== "1") assert.fail(`${name} did not exist: written, check it and run again`);
	}
	assert.equal(text, readFileSync(file, "utf8"), `${name} changed (UPDATE_GOLDEN=1 rewrites it)`);
}

test("rows: this session's runs newest first with each delegation's tasks beneath, then the folder's, then schedules", () => {
	const rows = fleetRows(DATA);
	assert.deepEqual(
		rows.map((r) => [r.id.slice(-2), r.kind, r.scope, r.depth]),
		[
			["03", "delegation", "session", 0],
			["02", "delegation", "session", 0],
			["04", "delegation", "session", 0],
			["05", "session", "session", 1],
			["06", "session", "session", 1],
			["01", "delegation", "session", 0],
			["07", "plan", "session", 0],
			["08", "delegation", "folder", 0],
			["ew", "schedule", "folder", 0],
			["ps", "schedule", "folder", 0],
		],
	);
	assert.equal(rows.find((r) => r.id === `delegation-${id(4)}`)!.session, undefined, "a delegation of two tasks has no one session to send to");
	assert.equal(rows.find((r) => r.id === id(2))!.session, id(2), "a one-task delegation is its session");
});

test("rows: a plan's step is a session beneath its plan, and the plan lists no agent of its own", () => {
	const planId = `plan-${id(40)}`;
	const rows = fleetRows({
		mine: [],
		folder: [
			run({ id: planId, kind: "delegation", name: "fleet-plan", agent: "plan", status: "completed", execution_status: "completed", started: ago(5), closed: ago(4), open: false }),
			run({ id: `${planId}-probe`, delegation_id: planId, name: "probe", agent: "scout", status: "completed", started: ago(5) }),
		],
		schedules: [],
	});
	assert.deepEqual(
		rows.map((r) => [r.title, r.kind, r.agent, r.depth, r.session]),
		[
			["fleet-plan", "plan", undefined, 0, undefined],
			["probe", "session", "scout", 1, `${planId}-probe`],
		],
	);
});

/**
 * The runs schedule fired this many seconds ago, as `list --cwd` answers: each
 * a delegation of one task (named after its agent) and that task's session;
 * with running, the newest runs; the others ended after 30 s.
 */
function fired(schedule: string, agent: string, agos: number[], running: boolean): ListItem[] {
	return agos.flatMap((s, i) => {
		const at = new Date(NOW - s * 1000).toISOString().replace(/[:.]/g, "");
		const d = `delegation-${schedule}-${at}`;
		const done = i > 0 || !running ? { status: "completed", execution_status: "completed", closed: ago(s - 30), open: false } : { status: "running" };
		const parent = `schedule:${schedule}`;
		return [
			run({ id: d, kind: "delegation", name: agent, agent: "delegation", started: ago(s), parent_session_id: parent, ...done }),
			run({ id: `0199b000-0000-7000-8000-${schedule.length}${String(i).padStart(11, "0")}`, delegation_id: d, name: agent, agent, started: ago(s), parent_session_id: parent, ...done }),
		];
	});
}

/** The folder of an hourly schedule that fired 45 times, and of one deleted since that fired 5 times the day before. */
const FIRED: FleetData = {
	mine: [DATA.mine[1]],
	folder: [
		...fired(
			"hourly-review",
			"scout",
			Array.from({ length: 45 }, (_, i) => 20 + i * 3600),
			true,
		),
		...fired(
			"old-sweep",
			"worker",
			Array.from({ length: 5 }, (_, i) => 90000 + i * 600),
			false,
		),
	],
	schedules: [{ id: "hourly-review", name: "hourly review", spec: "every 1h", kind: "delegation", paused: false, next_fires: [ago(-3580)], fires: 45 }],
};

test("rows: a schedule's run is one row named by the schedule and its fire time; the latest three are beneath it and one row counts the rest", () => {
	const rows = fleetRows(FIRED, NOW);
	assert.deepEqual(
		rows.map((r) => [r.kind, r.title, r.depth, r.agent, SECTION(rows, r)]),
		[
			["delegation", "send-target", 0, "scout", "session"],
			["delegation", "fired 03-01 09:00 · old-sweep", 0, "worker", "folder"],
			["delegation", "fired 03-01 08:50 · old-sweep", 0, "worker", "folder"],
			["delegation", "fired 03-01 08:40 · old-sweep", 0, "worker", "folder"],
			["more", "… 2 earlier runs of old-sweep", 0, undefined, "folder"],
			["schedule", "hourly review", 0, "every 1h", "schedule"],
			["delegation", "fired 09:59 · hourly review", 1, "scout", "schedule"],
			["delegation", "fired 08:59 · hourly review", 1, "scout", "schedule"],
			["delegation", "fired 07:59 · hourly review", 1, "scout", "schedule"],
			["more", "… 42 earlier runs", 1, undefined, "schedule"],
		],
	);
	// One row a run: the delegation, whose message and result go to its task's session.
	const newest = rows[6];
	assert.equal(newest.id, FIRED.folder[0].id);
	assert.equal(newest.session, FIRED.folder[1].id);
	assert.equal(newest.status, "running");
	assert.equal(rows.filter((r) => r.kind === "session").length, 0, "no run is listed twice");
});

test("rows: runs of a schedule that fired in the same minute (a trigger beside a fire) are told apart by their seconds", () => {
	const folder = fired("hourly-review", "scout", [95, 62, 30], false);
	const titles = fleetRows({ mine: [], folder, schedules: FIRED.schedules }, NOW)
		.filter((r) => r.kind === "delegation")
		.map((r) => r.title);
	assert.deepEqual(titles, ["fired 09:59:30 · hourly review", "fired 09:58:58 · hourly review", "fired 09:58:25 · hourly review"]);
});

test("rows: a delegation of several tasks keeps a row for each, also while only one of them has a session yet", () => {
	const d = `delegation-${id(60)}`;
	const rows = fleetRows({
		mine: [
			run({ id: d, kind: "delegation", name: "map, check", agent: "delegation", status: "running" }),
			run({ id: id(61), delegation_id: d, name: "map", agent: "scout", status: "running" }),
		],
		folder: [],
		schedules: [],
	});
	assert.deepEqual(
		rows.map((r) => [r.kind, r.title, r.depth, r.session]),
		[
			["delegation", "map, check", 0, undefined],
			["session", "map", 1, id(61)],
		],
	);
});

/** The section a row of rows is listed in (the heading the list draws above it). */
function SECTION(rows: FleetRow[], row: FleetRow): "session" | "folder" | "schedule" {
	const at = rows.indexOf(row);
	const lines = renderList(canvas(120), { rows, selected: -1, maxRows: 100, offset: 0, folder: "project" });
	const title = lines.findIndex((l) => l.includes(row.title.slice(0, 20)) && (row.kind !== "schedule" || l.includes("↻")));
	assert.ok(at >= 0 && title > 0, `${row.title} is not drawn`);
	const heading = lines
		.slice(0, title)
		.reverse()
		.find((l) => /^ (This session|This folder|Schedules of this folder)/.test(l))!;
	return heading.startsWith(" This session") ? "session" : heading.startsWith(" This folder") ? "folder" : "schedule";
}

test("a row's time: for how long it runs; how long ago it ended; when a finished run that stays open started", () => {
	const row = (over: Partial<FleetRow>): FleetRow => ({ id: "x", kind: "delegation", title: "x", status: "completed", scope: "session", depth: 0, open: false, ...over });
	const cases: Array<[string, FleetRow, string]> = [
		["running", row({ status: "running", started: NOW - 75_000 }), "for 1m15s"],
		["queued", row({ status: "queued", started: NOW - 3_000 }), "for 3s"],
		["completed: from its end, not its start", row({ started: NOW - 300_000, ended: NOW - 40_000 }), "40s ago"],
		["failed hours ago after a minute", row({ status: "failed", started: NOW - 7_260_000, ended: NOW - 7_200_000 }), "2h ago"],
		["completed, waiting for its parent's acknowledgement: no end to tell", row({ started: NOW - 40_000 }), "started 40s ago"],
		["a schedule: its next fire", row({ kind: "schedule", status: "active", next: NOW + 300_000 }), "in 5m00s"],
	];
	for (const [what, r, want] of cases) assert.equal(rowTime(r, NOW), want, what);
});

for (const width of [80, 120]) {
	test(`golden: a schedule's runs in the list at ${width} columns`, () => {
		const rows = fleetRows(FIRED, NOW);
		golden(`fleet-list-schedule-${width}.txt`, renderList(canvas(width), { rows, selected: 6, maxRows: 20, offset: 0, folder: "project" }), width);
	});
}

for (const width of [80, 120]) {
	test(`golden: the list at ${width} columns`, () => {
		const rows = fleetRows(DATA);
		golden(`fleet-list-${width}.txt`, renderList(canvas(width), { rows, selected: 1, maxRows: 20, offset: 0, folder: "project" }), width);
	});

	test(`golden: a delegation's detail at ${width} columns`, () => {
		const row = fleetRows(DATA).find((r) => r.id === `delegation-${id(4)}`)!;
		golden(`fleet-detail-${width}.txt`, renderDetail(canvas(width), { row, env: STATUS, task: 1, transcript: TRANSCRIPT, maxLines: 30 }), width);
	});

	test(`golden: the widget at ${width} columns`, () => {
		const running = [
			{ id: id(2), agent: "scout", name: "send-target", started: NOW - 12_000 },
			{ id: id(3), agent: "worker", name: "cancel-target", started: NOW - 8_000 },
			{ id: id(6), agent: "scout", name: "find every caller", started: NOW - 74_000 },
		];
		golden(`fleet-widget-${width}.txt`, renderWidget(canvas(width), running), width);
	});
}

test("the widget is no line at all when nothing runs, and keeps to narrow widths", () => {
	assert.deepEqual(renderWidget(canvas(80), []), []);
	const many = Array.from({ length: 9 }, (_, i) => ({ id: String(i), agent: `agent-${i}`, started: NOW - i * 1000 }));
	const [line] = renderWidget(canvas(40), many);
	assert.ok(tui.visibleWidth(line) <= 40, line);
	assert.match(line, /9 subagents running/);
});

test("a long list scrolls to keep the selected row in sight", () => {
	const mine = Array.from({ length: 30 }, (_, i) => run({ id: id(i), name: `task ${i}`, agent: "scout", status: "completed", started: ago(1000 - i) }));
	const rows = fleetRows({ mine, folder: [], schedules: [] });
	const lines = renderList(canvas(80), { rows, selected: 25, maxRows: 5, offset: 0, folder: "project" });
	assert.ok(lines.some((l) => l.startsWith("▸ ✓ task 4 ")), lines.join("\n"));
	assert.ok(lines.some((l) => l.includes("↑ 21 more")) && lines.some((l) => l.includes("↓ 4 more")), lines.join("\n"));
});

test("the theme's colors and the selected line's shade are pi's", () => {
	const marked: Paint = { fg: (c, t) => `<${c}>${t}</${c}>`, bold: (t) => `<b>${t}</b>`, bg: (c, t) => `<${c}>${t}</${c}>` };
	const kit = { ...tui, visibleWidth: (s: string) => tui.visibleWidth(s.replace(/<\/?[a-zA-Z]+>/g, "")) };
	const lines = renderList({ kit, paint: marked, width: 120, now: NOW }, { rows: fleetRows(DATA), selected: 0, maxRows: 20, offset: 0, folder: "project" });
	assert.ok(lines.some((l) => l.startsWith("<selectedBg>▸ <accent>●</accent>")), lines.join("\n"));
	assert.ok(lines.some((l) => l.includes("<success>✓</success>")));
});

/** A source that records what the view asks; over answers list and status otherwise. */
function recorder(over: { list?: () => Promise<{ data: FleetData; problems: string[] }>; status?: Envelope } = {}) {
	const calls: string[] = [];
	const source: FleetSource = {
		async list() {
			calls.push("list");
			return over.list ? over.list() : { data: DATA, problems: [] };
		},
		async status(x) {
			calls.push(`status ${x}`);
			return over.status ?? STATUS;
		},
		async schedule(x) {
			calls.push(`schedule ${x}`);
			return DESCRIBED;
		},
		async transcript(x) {
			calls.push(`transcript ${x}`);
			return TRANSCRIPT;
		},
		async send(x, m) {
			calls.push(`send ${x} ${m}`);
			return `Sent: it runs as turn 2 of ${x}, after the turn under way`;
		},
		async cancel(x) {
			calls.push(`cancel ${x}`);
			return `Cancelled ${x} (it was running)`;
		},
		async take(x, label) {
			calls.push(`take ${x} ${label}`);
			return `Put the result of ${label} into the conversation (12 characters)`;
		},
		async open(url) {
			calls.push(`open ${url}`);
			return `Temporal UI: ${url}`;
		},
	};
	return { calls, source };
}

const KEYS = { up: "\x1b[A", down: "\x1b[B", enter: "\r", esc: "\x1b" };
const settle = () => new Promise((r) => setTimeout(r, 10));

function view(source: FleetSource) {
	let closed = false;
	const kb = new tui.KeybindingsManager(tui.TUI_KEYBINDINGS);
	const v = new FleetView({
		source,
		kit: tui,
		paint: PLAIN,
		keys: { matches: (d, a) => kb.matches(d, a) },
		folder: "project",
		rows: () => 40,
		requestRender: () => {},
		close: () => (closed = true),
		now: () => NOW,
		every: () => () => {},
	});
	return { v, closed: () => closed };
}

test("the view: move, open a run and its task's transcript, send to the task, go back, close", async () => {
	const r = recorder();
	const { v, closed } = view(r.source);
	await settle();
	assert.deepEqual(r.calls, ["list"]);
	assert.ok(v.render(80).some((l) => l.startsWith("▸ ● cancel-target")), "the newest row is selected first");
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.enter);
	await settle();
	assert.deepEqual(r.calls.slice(1), [`status delegation-${id(4)}`, `transcript ${id(5)}`]);
	v.handleInput(KEYS.down);
	await settle();
	assert.equal(r.calls.at(-1), `transcript ${id(6)}`, "choosing a task reads its transcript");
	const detail = v.render(120).join("\n");
	assert.match(detail, /Transcript of find every caller/);
	assert.match(detail, /checking the tests next\./);

	v.handleInput("s");
	for (const ch of "also check the tests") v.handleInput(ch);
	assert.ok(v.render(120).some((l) => l.includes("Message to find every caller of the config loader across the whole repository: also check the tests")));
	v.handleInput(KEYS.enter);
	await settle();
	assert.ok(r.calls.includes(`send ${id(6)} also check the tests`), r.calls.join("\n"));
	assert.ok(v.render(120).some((l) => l.includes("Sent: it runs as turn 2")));

	v.handleInput(KEYS.esc);
	await settle();
	assert.equal(r.calls.at(-1), "list", "back on the list, it is asked again");
	assert.equal(closed(), false);
	assert.ok(v.render(80).some((l) => l.startsWith("▸ ● delegation …000000000004")), "the run stays selected");
	v.handleInput("j");
	assert.ok(v.render(80).some((l) => l.startsWith("▸ ✓   map the modules")), "j moves down as ↓ does");
	v.handleInput("k");
	assert.ok(v.render(80).some((l) => l.startsWith("▸ ● delegation …000000000004")), "k moves up");
	v.handleInput(KEYS.esc);
	assert.equal(closed(), true);
	v.dispose();
});

test("the view: cancel asks first; take and the UI page go to the selected run", async () => {
	const r = recorder();
	const { v } = view(r.source);
	await settle();
	v.handleInput("c");
	assert.ok(v.render(80).some((l) => l.includes("Cancel cancel-target? y to cancel it")));
	v.handleInput("n");
	await settle();
	assert.ok(!r.calls.some((c) => c.startsWith("cancel")), "any key but y keeps it");
	v.handleInput("c");
	v.handleInput("y");
	await settle();
	assert.ok(r.calls.includes(`cancel ${id(3)}`), r.calls.join("\n"));
	assert.ok(v.render(80).some((l) => l.includes(`Cancelled ${id(3)}`)));

	v.handleInput(KEYS.down);
	v.handleInput("t");
	await settle();
	assert.ok(r.calls.includes(`take ${id(2)} send-target`), r.calls.join("\n"));
	v.handleInput("u");
	await settle();
	assert.ok(r.calls.includes(`open http://127.0.0.1:8233/namespaces/default/workflows/${id(2)}`));

	// A delegation of several tasks: the message needs a task.
	v.handleInput(KEYS.down);
	v.handleInput("s");
	assert.ok(v.render(80).some((l) => l.includes("has several tasks: open it")));

	v.handleInput("r");
	assert.ok(v.render(80).some((l) => l.includes("Asking again…")));
	await settle();
	assert.ok(!v.render(80).some((l) => l.includes("Asking again…")), "gone once the answer is there");

	v.dispose();
});

test("the view asks again only while something runs, and its transcript only when the task moved on", async () => {
	const r = recorder();
	let now = NOW;
	let beat = () => {};
	const kb = new tui.KeybindingsManager(tui.TUI_KEYBINDINGS);
	const v = new FleetView({
		source: r.source,
		kit: tui,
		paint: PLAIN,
		keys: { matches: (d, a) => kb.matches(d, a) },
		folder: "project",
		rows: () => 40,
		requestRender: () => {},
		close: () => {},
		now: () => now,
		every: (_ms, fn) => {
			beat = fn;
			return () => {};
		},
	});
	await settle();
	now += 1000;
	beat();
	await settle();
	assert.deepEqual(r.calls, ["list"], "not before LIST_REFRESH_MS");
	now += 3000;
	beat();
	await settle();
	assert.deepEqual(r.calls, ["list", "list"]);
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.enter);
	await settle();
	now += 2000;
	beat();
	await settle();
	assert.deepEqual(r.calls.slice(2), [`status delegation-${id(4)}`, `transcript ${id(5)}`, `status delegation-${id(4)}`], "the same progress reads no transcript again");
	v.dispose();
});

test("the widget: asks while something runs, shows what runs, and comes down when nothing does", async () => {
	let answer: Array<{ id: string; agent: string; started: number }> = [];
	let asked = 0;
	const shown: string[][] = [];
	let up = false;
	let waiting = false;
	let started = false;
	let beat = () => {};
	let now = NOW;
	const w = new FleetWidget({
		source: {
			running: async () => {
				asked++;
				return answer;
			},
		},
		kit: tui,
		waiting: () => waiting,
		started: () => started,
		now: () => now,
		every: (_ms, fn) => {
			beat = fn;
			return () => (beat = () => {});
		},
		show: (factory) => {
			up = !!factory;
			if (factory) shown.push(factory(() => {}).render(80, PLAIN));
		},
	});
	w.kick(true);
	w.kick();
	await settle();
	assert.equal(asked, 0, "a session that started nothing and waits for nothing asks nothing");
	started = true;
	w.kick(true);
	await settle();
	assert.equal(asked, 1);
	assert.equal(up, false, "hidden when none runs");
	now += 5000;
	beat();
	await settle();
	assert.equal(asked, 1, "nothing runs: it stopped asking");

	answer = [{ id: "a", agent: "scout", started: NOW }];
	w.callRunning("call-1");
	await settle();
	assert.equal(asked, 2);
	assert.equal(up, true);
	assert.match(shown[0][0], /1 subagent running · scout 5s/);
	waiting = true;
	answer = [];
	w.callEnded("call-1");
	await settle();
	assert.equal(up, false, "down once none runs");
	now += 2000;
	beat();
	await settle();
	assert.equal(asked, 4, "a background delegation waited for keeps it asking");
	waiting = false;
	now += 2000;
	beat();
	await settle();
	now += 2000;
	beat();
	await settle();
	assert.equal(asked, 5, "then it stops");
	w.dispose();
});

test("the widget knows the live progress of this extension's tools", () => {
	assert.equal(ourProgress({ streaming: true, envelope: {} }), true);
	assert.equal(ourProgress({ windows: [] }), true);
	assert.equal(ourProgress({ contract_version: "task.v1" }), true);
	assert.equal(ourProgress({ exitCode: 0 }), false);
	assert.equal(ourProgress(undefined), false);
});

test("schedules: no service running is no schedules; a refusal or another failure is a problem the view names", async () => {
	const cli = (err: Error | undefined, answer: unknown = {}) => ({ call: async () => (err ? Promise.reject(err) : answer) }) as unknown as SubagentsCli;
	assert.deepEqual(await schedulesOf(cli(new SubagentsError("SERVICE_UNAVAILABLE", "no subagents service runs (/d/sock)", "unavailable", true)), "/p"), { schedules: [] });
	assert.deepEqual(await schedulesOf(cli(undefined, { schedules: DATA.schedules }), "/p"), { schedules: DATA.schedules });
	const refused = await schedulesOf(cli(new SubagentsError("INVALID_INPUT", "--cwd must be an absolute folder")), "/p");
	assert.deepEqual(refused, { schedules: [], problem: "schedules: INVALID_INPUT: --cwd must be an absolute folder" });
	const broken = await schedulesOf(cli(new SubagentsError("SERVICE_UNAVAILABLE", "the connection ended")), "/p");
	assert.deepEqual(broken, { schedules: [], problem: "schedules: SERVICE_UNAVAILABLE: the connection ended" });
});

/** The tasks a detail render shows: the ▸ line's task, the task heads, the "more" counts, whether the transcript has its lines. */
function shownTasks(lines: string[]) {
	const heads = lines.map((l) => /^ [▸ ] \S+ check package (\d+) /.exec(l)).filter((m) => m !== null);
	const sel = lines.map((l) => /^ ▸ \S+ check package (\d+) /.exec(l)).find((m) => m !== null);
	const count = (re: RegExp) => Number(lines.map((l) => re.exec(l)).find((m) => m)?.[1] ?? 0);
	const at = lines.findIndex((l) => l.startsWith(" Transcript of "));
	const transcript = at < 0 ? 0 : lines.slice(at + 1).filter((l) => l.startsWith("   ")).length;
	return { tasks: heads.map((m) => Number(m[1])), selected: sel ? Number(sel[1]) : -1, above: count(/↑ (\d+) more task/), below: count(/↓ (\d+) more task/), transcript };
}

test("a run of many tasks: they scroll to keep the selected one in sight, say how many are above and below, and its transcript keeps its lines", () => {
	const row = fleetRows(MANY)[0];
	// 8 tasks of six lines each at 100 x 40 (the view's 34 lines), the last but one selected.
	const eight = renderDetail(canvas(100), { row, env: manyTasks(8), task: 7, transcript: TRANSCRIPT, maxLines: 34 });
	const got = shownTasks(eight);
	assert.equal(got.selected, 7, eight.join("\n"));
	assert.ok(got.above > 0 && got.above + got.tasks.length + got.below === 8, `${JSON.stringify(got)}\n${eight.join("\n")}`);
	assert.ok(got.transcript >= 5, `the transcript's end is shown:\n${eight.join("\n")}`);
	assert.ok(eight.length <= 34);
	// Every selection of a delegation of 16 tasks (the most a delegation has), at both widths.
	for (const width of [80, 120]) {
		let offset = 0;
		for (let task = 0; task < 16; task++) {
			const v = detailView(canvas(width), { row, env: manyTasks(16), task, offset, transcript: TRANSCRIPT, maxLines: 34 });
			const g = shownTasks(v.lines);
			assert.equal(g.selected, task, v.lines.join("\n"));
			assert.equal(g.above + g.tasks.length + g.below, 16, `${JSON.stringify(g)}\n${v.lines.join("\n")}`);
			assert.equal(g.above, g.tasks[0], "the count above is the tasks not shown above");
			assert.ok(g.transcript >= 5, v.lines.join("\n"));
			assert.ok(v.lines.length <= 34, `${v.lines.length} lines`);
			offset = v.offset;
		}
		// Back up: the window stays while the selection moves inside it.
		const first = detailView(canvas(width), { row, env: manyTasks(16), task: 14, offset, transcript: TRANSCRIPT, maxLines: 34 });
		assert.equal(first.offset, offset, "moving up inside the window does not move it");
	}
});

for (const width of [80, 120]) {
	test(`golden: a delegation of 16 tasks at ${width} columns, the tenth selected`, () => {
		const row = fleetRows(MANY)[0];
		golden(`fleet-detail16-${width}.txt`, renderDetail(canvas(width), { row, env: manyTasks(16), task: 9, transcript: TRANSCRIPT, maxLines: 34 }), width);
	});

	test(`golden: a schedule opened at ${width} columns`, () => {
		const row = fleetRows(DATA).find((r) => r.id === "nightly-review")!;
		golden(`fleet-schedule-${width}.txt`, renderSchedule(canvas(width), { row, item: DESCRIBED, maxLines: 34 }), width);
	});
}

test("a paused schedule's row and screen: paused, since when, its note, how it fires again; never a next fire", () => {
	// An older service lists a paused schedule's next fires where the pause left them, in the past.
	const item: ScheduleItem = { id: "scan-1a2b3c", name: "scan the logs", spec: "every 2h", paused: true, paused_since: ago(3 * 3600), note: "holidays", next_fires: [ago(600)], fires: 4 };
	const row = fleetRows({ mine: [], folder: [], schedules: [item] })[0];
	assert.equal(row.status, "paused");
	assert.equal(rowTime(row, NOW), "3h ago", "how long it has been paused, not a next fire in 0s");
	assert.equal(rowTime(fleetRows({ mine: [], folder: [], schedules: [{ ...item, paused_since: undefined }] })[0], NOW), "-", "paused from the UI: no time known");
	const line = rowLine(canvas(160), row, false);
	assert.match(line, /scan the logs · to resume: subagents schedule resume scan-1a2b3c .* paused +3h ago/);
	assert.doesNotMatch(line, /in \d/);
	const screen = renderSchedule(canvas(160), { row, item, maxLines: 20 }).join("\n");
	assert.match(screen, /Paused 3h ago: holidays/);
	assert.match(screen, /paused: no next fire until `subagents schedule resume scan-1a2b3c`/);
	assert.doesNotMatch(screen, /next in/);
	// An active one still says when it fires next.
	assert.equal(rowTime(fleetRows({ mine: [], folder: [], schedules: [{ ...item, paused: false, next_fires: [ago(-300)] }] })[0], NOW), "in 5m00s");
});

test("the view: ↓ through a delegation of 16 tasks keeps the selected one on the screen", async () => {
	const r = recorder({ list: async () => ({ data: MANY, problems: [] }), status: manyTasks(16) });
	const { v } = view(r.source);
	await settle();
	v.handleInput(KEYS.enter);
	await settle();
	for (let task = 0; task < 16; task++) {
		const g = shownTasks(v.render(100));
		assert.equal(g.selected, task, v.render(100).join("\n"));
		assert.equal(g.above + g.tasks.length + g.below, 16);
		v.handleInput(KEYS.down);
		await settle();
	}
	const bottom = shownTasks(v.render(100));
	v.handleInput(KEYS.up);
	await settle();
	assert.deepEqual(shownTasks(v.render(100)).tasks, bottom.tasks, "↑ inside the window moves the selection, not the window");
	v.dispose();
});

test("the view: a problem shows while it holds and goes once the part answers; a notice never hides it", async () => {
	const down = "The subagents service is not running: nothing runs";
	let answer: { data: FleetData; problems: string[] } | Error = { data: { mine: [], folder: [], schedules: [] }, problems: [down] };
	const r = recorder({
		list: async () => {
			if (answer instanceof Error) throw answer;
			return answer;
		},
	});
	const { v } = view(r.source);
	await settle();
	const screen = () => v.render(120).join("\n");
	assert.match(screen(), new RegExp(down));
	v.handleInput("r");
	assert.match(screen(), /Asking again…/);
	assert.match(screen(), new RegExp(down), "asking again keeps the problem on the screen");
	await settle();
	assert.doesNotMatch(screen(), /Asking again…/);
	assert.match(screen(), new RegExp(down), "still down: still said");
	// The service runs again: the problem goes.
	answer = { data: DATA, problems: [] };
	v.handleInput("r");
	await settle();
	assert.doesNotMatch(screen(), /not running/, "recovered: the old problem is gone");
	// An action's notice on the screen, and a new problem: both show.
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.down);
	v.handleInput("s");
	assert.match(screen(), /has several tasks: open it/);
	answer = { data: DATA, problems: ["this folder's runs: the connection ended"] };
	await (v as unknown as { refreshList(): Promise<void> }).refreshList();
	assert.match(screen(), /has several tasks: open it/);
	assert.match(screen(), /this folder's runs: the connection ended/, "a notice does not hide a new problem");
	// A list that fails as a whole is a problem too, gone at the next answer.
	answer = new Error("the socket closed");
	v.handleInput("r");
	await settle();
	assert.match(screen(), /the socket closed/);
	answer = { data: DATA, problems: [] };
	v.handleInput("r");
	await settle();
	assert.doesNotMatch(screen(), /the socket closed|connection ended/);
	v.dispose();
});

test("the view: a schedule row takes no message or result and says why; enter shows its next fires and recent runs", async () => {
	const r = recorder();
	const { v, closed } = view(r.source);
	await settle();
	const at = fleetRows(DATA).findIndex((x) => x.id === "nightly-review");
	for (let i = 0; i < at; i++) v.handleInput(KEYS.down);
	assert.ok(v.render(120).some((l) => l.startsWith("▸ ↻ review the day's changes")));
	for (const key of ["s", "t"]) {
		v.handleInput(key);
		const said = v.render(120).join(" ");
		assert.match(said.replace(/\s+/g, " "), /review the day's changes is a schedule: it (takes no message|has no result of its own); its latest runs are listed beneath it/);
		assert.doesNotMatch(said, /several tasks/);
	}
	v.handleInput("c");
	assert.match(v.render(120).join(" "), /is a schedule: it is paused or deleted, not cancelled/);
	v.handleInput(KEYS.enter);
	await settle();
	assert.equal(r.calls.at(-1), "schedule nightly-review");
	const opened = v.render(120).join("\n");
	assert.match(opened, /Subagents › schedule review the day's changes/);
	assert.match(opened, /Fired 12 times, 1 missed · next in 5m00s, in 1d00h, in 2d00h/);
	assert.match(opened, /✓ 8h ago · completed · delivered · two changes need a test · …000000000031/);
	assert.match(opened, /✗ 1d ago · failed · waits for a pi session here · the reviewer ran out of time · …000000000032/);
	v.handleInput("u");
	await settle();
	assert.equal(r.calls.at(-1), "open http://127.0.0.1:8233/namespaces/default/schedules/nightly-review");
	v.handleInput(KEYS.esc);
	await settle();
	assert.equal(closed(), false, "esc goes back to the list");
	assert.ok(v.render(120).some((l) => l.startsWith("▸ ↻ review the day's changes")));
	v.dispose();
});

test("the view: a schedule's run takes a message to its task's session; enter on the count of earlier runs opens the schedule", async () => {
	const r = recorder({ list: async () => ({ data: FIRED, problems: [] }) });
	const { v } = view(r.source);
	await settle();
	const select = (title: string) => {
		for (let i = 0; i < 20 && !v.render(120).some((l) => l.startsWith("▸") && l.includes(title)); i++) v.handleInput(KEYS.down);
		assert.ok(
			v.render(120).some((l) => l.startsWith("▸") && l.includes(title)),
			v.render(120).join("\n"),
		);
	};
	select("fired 09:59 · hourly review");
	v.handleInput("s");
	for (const ch of "look again") v.handleInput(ch);
	v.handleInput(KEYS.enter);
	await settle();
	assert.ok(r.calls.includes(`send ${FIRED.folder[1].id} look again`), r.calls.join("\n"));
	select("… 42 earlier runs");
	v.handleInput("c");
	assert.match(v.render(120).join(" "), /earlier runs of schedule hourly-review are not listed here/);
	v.handleInput(KEYS.enter);
	await settle();
	assert.equal(r.calls.at(-1), "schedule hourly-review");
	assert.match(v.render(120).join("\n"), /Subagents › schedule hourly review/);
	v.handleInput(KEYS.esc);
	await settle();
	assert.ok(
		v.render(120).some((l) => l.startsWith("▸") && l.includes("… 42 earlier runs")),
		"back on the list, the count stays selected (not its schedule, which shares its ID)",
	);
	v.dispose();
});

/** A pi that records what the fleet registers, and fires its events. */
function fakePi() {
	const handlers = new Map<string, Array<(event: unknown, ctx: unknown) => unknown>>();
	let command: { handler: (args: string, ctx: unknown) => Promise<void> } | undefined;
	const entries: Array<{ customType: string; data: unknown }> = [];
	const pi = {
		on: (name: string, fn: (event: unknown, ctx: unknown) => unknown) => handlers.set(name, [...(handlers.get(name) ?? []), fn]),
		registerCommand: (_name: string, opts: typeof command) => (command = opts),
		sendMessage: () => {},
		appendEntry: (customType: string, data: unknown) => entries.push({ customType, data }),
	} as unknown as ExtensionAPI;
	const fire = async (name: string, event: unknown = {}, ctx: unknown = {}) => {
		for (const fn of handlers.get(name) ?? []) await fn(event, ctx);
	};
	return { pi, fire, entries, command: () => command! };
}


/** The fleet registered on a fake pi, with a client that records each call and whether it was passive (starts no service). */
function fleetOn(over: { down?: boolean; running?: string[]; pending?: boolean; send?: unknown } = {}) {
	const calls: Array<{ verb: string; passive: boolean; args: string[] }> = [];
	const watched: string[] = [];
	const answers: Record<string, unknown> = {
		list: { runs: [...DATA.mine] },
		status: STATUS,
		transcript: { text: TRANSCRIPT },
		schedule: { schedules: [DESCRIBED] },
		send: over.send ?? { accepted_turn: 2 },
		output: { text: "the loader is config/load.go" },
		cancel: { cancel_applied: true, prior_status: "running" },
	};
	const cli = (passive?: boolean) =>
		({
			call: async (verb: string, flags: string[] = [], positional: string[] = [], input?: Record<string, unknown>) => {
				calls.push({ verb, passive: passive === true, args: [...flags, ...positional, ...(input ? [JSON.stringify(input)] : [])] });
				if (over.down && passive) throw new SubagentsError("SERVICE_UNAVAILABLE", "no subagents service runs (/d/sock)", "unavailable", true);
				return answers[verb] ?? {};
			},
		}) as unknown as SubagentsCli;
	const delivery = {
		parent: () => "parent-session",
		delivering: () => "parent-session",
		running: () => over.running ?? [],
		mayHavePending: () => over.pending ?? false,
		own: <T>(p: T) => p,
		watch: (id: string) => watched.push(id),
		watchTurn: (session: string, turn: number) => watched.push(`${session}#${turn}`),
	} as unknown as Delivery;
	const f = fakePi();
	registerFleet(f.pi, { cli, delivery, loadTui: async () => tui });
	let widgetUp = false;
	const notes: string[] = [];
	const ctx = (mode: string, branch: unknown[] = []) => ({
		mode,
		cwd: "/home/me/project",
		// pi's: print and JSON runs have no UI (their ui.notify does nothing).
		hasUI: mode === "tui" || mode === "rpc",
		sessionManager: { getSessionId: () => "parent-session", getBranch: () => branch, getSessionFile: () => undefined },
		ui: {
			setWidget: (_key: string, factory: unknown) => (widgetUp = !!factory),
			notify: (text: string) => notes.push(text),
			custom: async (factory: (term: unknown, theme: unknown, kb: unknown, done: (v: unknown) => void) => FleetView) => {
				let done!: () => void;
				const closed = new Promise<void>((r) => (done = r));
				const kb = new tui.KeybindingsManager(tui.TUI_KEYBINDINGS);
				const v = factory({ terminal: { rows: 40 }, requestRender: () => {} }, PLAIN, kb, () => done());
				viewOpened(v);
				await closed;
				v.dispose();
			},
		},
	});
	let viewOpened: (v: FleetView) => void = () => {};
	const opened = () => new Promise<FleetView>((r) => (viewOpened = r));
	return { ...f, calls, ctx, notes, opened, watched, widgetUp: () => widgetUp };
}

test("the widget asks nothing in a session that started nothing and waits for nothing; it looks once this session delegated", async () => {
	const f = fleetOn();
	const ctx = f.ctx("tui");
	await f.fire("session_start", {}, ctx);
	await f.fire("turn_end", {}, ctx);
	await f.fire("agent_settled", {}, ctx);
	await settle();
	assert.deepEqual(f.calls, [], "no call at the start, at a turn's end or at settling");
	await f.fire("tool_execution_end", { toolCallId: "c1", toolName: "bash", result: { details: { exitCode: 0 } } }, ctx);
	await f.fire("turn_end", {}, ctx);
	await settle();
	assert.deepEqual(f.calls, [], "another extension's tool is no delegation");
	// A call of this extension's (the subagent tool's result): the next turn's end looks.
	await f.fire("tool_execution_end", { toolCallId: "c2", toolName: "subagent", result: { details: { mode: "single", sessionId: id(2), results: [] } } }, ctx);
	await f.fire("turn_end", {}, ctx);
	await settle();
	assert.deepEqual(f.calls, [{ verb: "list", passive: true, args: ["--kind", "session", "--open", "--parent-session", "parent-session"] }]);
	await f.fire("session_shutdown");

	// A session whose history holds a delegation (an earlier run of it), or whose mark says results may wait, or that waits for a background delegation: it looks at its start.
	const branch = [{ type: "message", message: { role: "toolResult", toolName: "task", details: { contract_version: "task.v1", op: "start" } } }];
	for (const [what, g, c] of [
		["history", fleetOn(), branch],
		["mark", fleetOn({ pending: true }), []],
		["background", fleetOn({ running: [`delegation-${id(4)}`] }), []],
	] as const) {
		await g.fire("session_start", {}, g.ctx("tui", [...c]));
		await settle();
		assert.equal(g.calls.length, 1, `${what}: ${JSON.stringify(g.calls)}`);
		await g.fire("session_shutdown");
	}
});

test("a message sent from the view: its answer comes back into this session, from a running task's next turn as from a resumed one", async () => {
	for (const [what, send, watched, said] of [
		["a running task: its next turn", { accepted_turn: 2 }, [`${id(2)}#2`], /Sent: it runs as turn 2 of .*; its answer comes back here/],
		["a task between turns: a delegation resumes it", { delegation_id: "delegation-resumed", done: false }, ["delegation-resumed"], /goes on with it \(delegation-resumed\); its result comes back here/],
	] as const) {
		const f = fleetOn({ send });
		const opened = f.opened();
		const running = f.command().handler("", f.ctx("tui"));
		const v = await opened;
		await settle();
		v.handleInput(KEYS.down);
		v.handleInput("s");
		for (const ch of "also check the tests") v.handleInput(ch);
		v.handleInput(KEYS.enter);
		await settle();
		assert.deepEqual(f.watched, watched, what);
		assert.match(v.render(200).join(" "), said, what);
		v.handleInput(KEYS.esc);
		await running;
	}
});

test("/subagents outside the terminal answers in every mode: a notification in RPC, a session entry a JSON run prints, stderr in a print run", async () => {
	const want = /done-task[^]*send-target[^]*Waiting in the background for: delegation-x/;
	for (const mode of ["rpc", "json", "print"] as const) {
		const f = fleetOn({ running: ["delegation-x"] });
		const said = await stderrOf(() => f.command().handler("", f.ctx(mode)));
		const got = { notes: f.notes.length, entries: f.entries.length, stderr: said !== "" };
		assert.deepEqual(got, { notes: mode === "rpc" ? 1 : 0, entries: mode === "json" ? 1 : 0, stderr: mode === "print" }, mode);
		const text = mode === "rpc" ? f.notes[0] : mode === "json" ? (f.entries[0].data as { text: string }).text : said;
		assert.match(text, want, mode);
		if (mode === "json") assert.deepEqual({ ...f.entries[0], data: { ...(f.entries[0].data as object), text: "" } }, { customType: "subagents-answer", data: { command: "subagents", level: "info", text: "" } });
	}
});

test("looking starts no service: /subagents outside the terminal, a run's state and transcript, a schedule, a result taken; sending and cancelling may", async () => {
	const down = fleetOn({ down: true });
	const said = await stderrOf(() => down.command().handler("", down.ctx("print")));
	assert.deepEqual(
		down.calls.map((c) => [c.verb, c.passive]),
		[["list", true]],
	);
	assert.match(said, /The subagents service is not running: nothing runs/);

	const f = fleetOn();
	const ctx = f.ctx("tui");
	const opened = f.opened();
	const running = f.command().handler("", ctx);
	const v = await opened;
	await settle();
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.down);
	v.handleInput(KEYS.enter);
	await settle();
	v.handleInput(KEYS.down);
	await settle();
	v.handleInput("s");
	for (const ch of "go on") v.handleInput(ch);
	v.handleInput(KEYS.enter);
	await settle();
	v.handleInput(KEYS.esc);
	await settle();
	const at = fleetRows(DATA).findIndex((x) => x.id === "nightly-review");
	for (let i = 0; i < at; i++) v.handleInput(KEYS.down);
	v.handleInput(KEYS.enter);
	await settle();
	assert.match(v.render(120).join("\n"), /Recent runs/);
	v.handleInput(KEYS.esc);
	await settle();
	// The first row, a one-task delegation: its result taken, and it cancelled.
	for (let i = 0; i < at; i++) v.handleInput(KEYS.up);
	v.handleInput("t");
	await settle();
	v.handleInput("c");
	v.handleInput("y");
	await settle();
	v.handleInput(KEYS.esc);
	await running;
	const by = (verb: string) => [...new Set(f.calls.filter((c) => c.verb === verb).map((c) => c.passive))];
	assert.deepEqual(by("cancel"), [false], "a cancel may start the service");
	for (const verb of ["list", "status", "transcript", "schedule", "output"]) assert.deepEqual(by(verb), [true], `${verb}: ${JSON.stringify(f.calls)}`);
	assert.deepEqual(by("send"), [false], "a message may start the service, as the task tool's send does");
	assert.ok(f.calls.some((c) => c.verb === "schedule" && c.args.includes(JSON.stringify({ action: "describe", id: "nightly-review" }))));
});
