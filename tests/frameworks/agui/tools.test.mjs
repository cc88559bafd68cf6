// Frontend tools through @ag-ui/client's HttpAgent, unchanged, and the binary encoding of a
// tool round decoded by @ag-ui/proto.
//
// Environment: AGUI_URL (the HTTP listener), AGUI_DEFINITION (a definition whose model, on
// the input "/tools", calls every declared tool once, and answers "N tool results" once the
// results are in), AGUI_APPROVE_DEFINITION (the same model with the `clock` tool's calls
// waiting for approval), AGUI_SECRET (what the browser's weather tool returns: it must
// never reach the server's logs).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import test from "node:test";

import { HttpAgent } from "@ag-ui/client";
import { AGUI_MEDIA_TYPE, decode } from "@ag-ui/proto";

const BASE = process.env.AGUI_URL;
const DEFINITION = process.env.AGUI_DEFINITION;
const APPROVE = process.env.AGUI_APPROVE_DEFINITION;
const TOOLS = [
  {
    name: "weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { n: { type: "integer" } } },
  },
  { name: "clock", description: "The time", parameters: { type: "object" } },
];
// What the browser's tools return.
const RUN = { weather: () => process.env.AGUI_SECRET, clock: () => "9:00" };

function agent(definition) {
  return new HttpAgent({ url: `${BASE}/agui/${definition}`, threadId: `thread-${randomUUID()}` });
}

// Runs the agent once; what its run finished with.
async function runOnce(target, parameters = {}) {
  const finished = [];
  const ended = [];
  const subscriber = {
    onRunFinishedEvent: (params) => void finished.push(params),
    onToolCallEndEvent: ({ toolCallName, toolCallArgs }) =>
      void ended.push([toolCallName, toolCallArgs]),
  };
  await target.runAgent({ tools: TOOLS, ...parameters }, subscriber);
  assert.equal(finished.length, 1);
  return { finished: finished[0], ended };
}

// Runs the browser's tools for `callIds` of the agent's last tool calls.
function answer(target, callIds) {
  const made = target.messages.findLast((m) => m.role === "assistant" && m.toolCalls?.length);
  for (const call of made.toolCalls.filter((c) => callIds.includes(c.id))) {
    target.addMessage({
      id: `tool-${randomUUID()}`,
      role: "tool",
      toolCallId: call.id,
      content: RUN[call.function.name](),
    });
  }
}

test("a frontend tool round: the calls, the pending ids, and the run that continues", async () => {
  const chat = agent(DEFINITION);
  chat.addMessage({ id: `m-${randomUUID()}`, role: "user", content: "/tools" });
  const first = await runOnce(chat);
  assert.equal(first.finished.outcome, "success");
  assert.deepEqual(first.finished.pendingToolCallIds, ["call-0", "call-1"]);
  assert.deepEqual(first.ended, [
    ["weather", { n: 0 }],
    ["clock", { n: 1 }],
  ]);
  const made = chat.messages.at(-1);
  assert.equal(made.role, "assistant");
  assert.equal(made.id, first.finished.result.assistantMessageId);
  assert.deepEqual(
    made.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments]),
    [
      ["call-0", "weather", '{"n":0}'],
      ["call-1", "clock", '{"n":1}'],
    ],
  );
  answer(chat, first.finished.pendingToolCallIds);
  const second = await runOnce(chat);
  assert.equal(second.finished.outcome, "success");
  assert.deepEqual(second.finished.pendingToolCallIds, []);
  assert.equal(chat.messages.at(-1).role, "assistant");
  assert.equal(chat.messages.at(-1).content, "2 tool results");
});

test("an approval interrupts the run; the resume that denies it continues the answer", async () => {
  const chat = agent(APPROVE);
  chat.addMessage({ id: `m-${randomUUID()}`, role: "user", content: "/tools" });
  const first = await runOnce(chat);
  assert.equal(first.finished.outcome, "interrupt");
  assert.deepEqual(
    first.finished.interrupts.map((i) => [i.id, i.reason, i.toolCallId]),
    [["call-1", "tool_call", "call-1"]],
  );
  assert.deepEqual(chat.pendingInterrupts.map((i) => i.id), ["call-1"]);
  // A run that leaves the interrupt unanswered is refused by the agent itself.
  await assert.rejects(chat.runAgent({ tools: TOOLS }), /pending interrupt/);
  answer(chat, ["call-0"]);
  const payload = { approved: false, reason: "not now" };
  const resume = [{ interruptId: "call-1", status: "resolved", payload }];
  const second = await runOnce(chat, { resume });
  assert.equal(second.finished.outcome, "success");
  assert.deepEqual(chat.pendingInterrupts, []);
  assert.equal(chat.messages.at(-1).content, "2 tool results");
});

test("a tool round in the binary encoding decodes with @ag-ui/proto", async () => {
  const input = {
    threadId: `thread-${randomUUID()}`,
    runId: `run-${randomUUID()}`,
    messages: [{ id: `m-${randomUUID()}`, role: "user", content: "/tools" }],
    tools: TOOLS,
  };
  const post = (definition) =>
    fetch(`${BASE}/agui/${definition}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: AGUI_MEDIA_TYPE },
      body: JSON.stringify({ ...input, threadId: `thread-${randomUUID()}` }),
    });
  const events = frames(new Uint8Array(await (await post(DEFINITION)).arrayBuffer()));
  const starts = events.filter((e) => e.type === "TOOL_CALL_START");
  assert.deepEqual(
    starts.map((e) => [e.toolCallId, e.toolCallName]),
    [
      ["call-0", "weather"],
      ["call-1", "clock"],
    ],
  );
  const done = events.at(-1);
  assert.equal(done.type, "RUN_FINISHED");
  const parent = done.result.assistantMessageId;
  assert.deepEqual(
    starts.map((e) => e.parentMessageId),
    [parent, parent],
  );
  const args = events.filter((e) => e.type === "TOOL_CALL_ARGS" && e.toolCallId === "call-0");
  assert.equal(args.map((e) => e.delta).join(""), '{"n":0}');
  assert.equal(events.filter((e) => e.type === "TOOL_CALL_END").length, 2);
  assert.deepEqual(done.outcome, { type: "success", pendingToolCallIds: ["call-0", "call-1"] });
  const paused = frames(new Uint8Array(await (await post(APPROVE)).arrayBuffer())).at(-1);
  assert.equal(paused.outcome.type, "interrupt");
  assert.deepEqual(paused.outcome.pendingToolCallIds, ["call-0"]);
  const [interrupt] = paused.outcome.interrupts;
  assert.equal(interrupt.id, "call-1");
  assert.equal(interrupt.toolCallId, "call-1");
  assert.equal(interrupt.reason, "tool_call");
  assert.deepEqual(interrupt.responseSchema.required, ["approved"]);
});

function frames(bytes) {
  const events = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at < bytes.length) {
    const length = view.getUint32(at, false);
    events.push(decode(bytes.subarray(at + 4, at + 4 + length)));
    at += 4 + length;
  }
  return events;
}
