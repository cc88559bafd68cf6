// The README's tool round (examples/tools.ts) against the live server, with model replies
// of the corpus (tests/conformance/scenarios/tool-round.yaml and tool-approval.yaml).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Role } from "@agentskit/chat-client";
import { askWithTools } from "../examples/tools.js";
import { liveClient, SKIP_WITHOUT_SERVER } from "../conformance/live.js";

const skip = SKIP_WITHOUT_SERVER;

test("the tools example answers every pending call until the model answers", { skip }, async () => {
  const client = liveClient();
  const session = await client.createSession("conformance");
  await askWithTools(client, session.sessionId, "conformance tools: weather in Paris and the time");
  const { messages } = await client.getSession(session.sessionId);
  assert.deepEqual(
    messages.map((message) => [message.role, message.toolCallId]),
    [
      [Role.USER, ""],
      [Role.ASSISTANT, ""],
      [Role.TOOL, "call_conf_weather"],
      [Role.TOOL, "call_conf_clock"],
      [Role.ASSISTANT, ""],
    ],
  );
  assert.deepEqual(
    messages[1]?.toolCalls.map((call) => call.name),
    ["weather", "clock"],
  );
  assert.equal(
    messages.at(-1)?.content,
    "The fake model got 2 tool results (call_conf_weather, call_conf_clock).",
  );
});

test("the tools example approves or denies a call waiting for approval", { skip }, async () => {
  const client = liveClient();
  for (const approved of [true, false]) {
    const session = await client.createSession("conformance");
    const asked: string[] = [];
    const approve = (name: string): boolean => {
      asked.push(name);
      return approved;
    };
    await askWithTools(client, session.sessionId, "conformance tools: refund order 7", approve);
    assert.deepEqual(asked, ["refund"]);
    const { messages } = await client.getSession(session.sessionId);
    const result = messages.find((message) => message.role === Role.TOOL);
    assert.equal(result?.toolCallId, "call_conf_refund_7");
    assert.equal(result?.content.startsWith("The user denied this tool call"), !approved);
    assert.equal(messages.at(-1)?.content, "The fake model got 1 tool result (call_conf_refund_7).");
  }
});
