// A tool round through the client's helpers, against an in-memory server: the requests the
// server receives and the events and results the caller sees.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import { ChatClient, Operation, ToolWait, type TurnEvent } from "@agentskit/chat-client";
import {
  ChatService,
  PendingToolCallSchema,
  type StreamTurnRequest,
  type StreamTurnResponse,
  StreamTurnResponseSchema,
  ToolCallSchema,
  TurnCompletedSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";

const TOOL = {
  name: "local_time",
  description: "The user's local time",
  parameters: { type: "object", properties: { zone: { type: "string" } } },
};

/**
 * A server whose first answer calls `local_time` and waits for its result, and whose
 * answer to anything else is text; it keeps every request it received.
 */
function toolServer(): { client: ChatClient; requests: StreamTurnRequest[] } {
  const requests: StreamTurnRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ChatService, {
      async *streamTurn(request) {
        requests.push(request);
        const calling = request.operation.case === "submit";
        yield* (calling ? callingAnswer : textAnswer)(request);
      },
    });
  });
  return { client: new ChatClient(transport), requests };
}

function respond(
  request: StreamTurnRequest,
  events: MessageInitShape<typeof StreamTurnResponseSchema>["event"][],
): StreamTurnResponse[] {
  return events.map((event, index) =>
    create(StreamTurnResponseSchema, {
      sessionId: request.sessionId,
      turnId: request.turnId,
      sequence: BigInt(index + 1),
      event,
    }),
  );
}

function callingAnswer(request: StreamTurnRequest): StreamTurnResponse[] {
  const args = '{"zone":"UTC"}';
  return respond(request, [
    { case: "started", value: { operation: Operation.SUBMIT } },
    { case: "toolCallStarted", value: { toolCallId: "c1", name: "local_time" } },
    { case: "toolCallDelta", value: { toolCallId: "c1", argumentsDelta: '{"zone"' } },
    { case: "toolCallDelta", value: { toolCallId: "c1", argumentsDelta: ':"UTC"}' } },
    {
      case: "toolCallEnded",
      value: { toolCallId: "c1", arguments: args, wait: ToolWait.RESULT },
    },
    {
      case: "completed",
      value: create(TurnCompletedSchema, {
        finishReason: "tool_calls",
        toolCalls: [create(ToolCallSchema, { id: "c1", name: "local_time", arguments: args })],
        pendingToolCalls: [
          create(PendingToolCallSchema, {
            toolCallId: "c1",
            name: "local_time",
            wait: ToolWait.RESULT,
          }),
        ],
      }),
    },
  ]);
}

function textAnswer(request: StreamTurnRequest): StreamTurnResponse[] {
  return respond(request, [
    { case: "started", value: { operation: Operation.TOOL_RESULTS } },
    { case: "delta", value: { text: "It is 09:00." } },
    { case: "completed", value: { content: "It is 09:00.", finishReason: "stop" } },
  ]);
}

async function collect(events: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const seen: TurnEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

test("submit declares tools and streams the calls the answer makes", async () => {
  const { client, requests } = toolServer();
  const events = await collect(
    client.submit("s", "What time is it?", {
      tools: [TOOL],
      toolChoice: "auto",
      parallelToolCalls: true,
    }),
  );
  assert.deepEqual(
    events.map((event) => event.kind),
    ["started", "toolCallStarted", "toolCallDelta", "toolCallDelta", "toolCallEnded", "completed"],
  );
  const pieces = events.flatMap((event) =>
    event.kind === "toolCallDelta" ? [event.value.argumentsDelta] : [],
  );
  const ended = events.find((event) => event.kind === "toolCallEnded");
  assert.ok(ended?.kind === "toolCallEnded");
  assert.equal(pieces.join(""), ended.value.arguments);
  const [request] = requests;
  assert.deepEqual(
    request?.tools.map((tool) => [tool.name, tool.description, JSON.parse(tool.parametersJson)]),
    [[TOOL.name, TOOL.description, TOOL.parameters]],
  );
  assert.deepEqual([request?.toolChoice, request?.parallelToolCalls], ["auto", true]);
});

test("a tool round: run the turn, read its pending calls, answer them with toolResults", async () => {
  const { client, requests } = toolServer();
  const asked = await client.runTurn({
    sessionId: "s",
    operation: { case: "submit", value: { content: "What time is it?" } },
    tools: [TOOL],
  });
  assert.deepEqual(
    asked.toolCalls.map((call) => [call.id, call.name, JSON.parse(call.arguments)]),
    [["c1", "local_time", { zone: "UTC" }]],
  );
  assert.deepEqual(
    asked.pendingToolCalls.map((call) => [call.toolCallId, call.name, call.wait]),
    [["c1", "local_time", ToolWait.RESULT]],
  );
  const results = asked.pendingToolCalls.map((call) => ({
    toolCallId: call.toolCallId,
    content: '{"time":"09:00"}',
  }));
  const answer = await collect(
    client.toolResults("s", { results }, { tools: [TOOL], turnId: "round-2" }),
  );
  assert.equal(answer.at(-1)?.kind, "completed");
  assert.ok(answer.every((event) => event.turnId === "round-2"));
  const sent = requests[1];
  assert.equal(sent?.operation.case, "toolResults");
  assert.deepEqual(
    sent?.operation.case === "toolResults" &&
      sent.operation.value.results.map((r) => [r.toolCallId, r.content]),
    [["c1", '{"time":"09:00"}']],
  );
  assert.deepEqual(sent?.tools.map((tool) => tool.name), ["local_time"]);

  const plain = await client.runTurn({
    sessionId: "s",
    operation: { case: "toolResults", value: { approvals: [{ toolCallId: "c1", approved: true }] } },
  });
  assert.deepEqual([plain.toolCalls, plain.pendingToolCalls], [[], []], "an answer without calls");
  assert.deepEqual(requests[2]?.tools, [], "no tools declared, none sent");
});

test("toolResults sends approvals, and dispatch sends them with a client-held history", async () => {
  const { client, requests } = toolServer();
  await collect(
    client.toolResults("s", {
      approvals: [
        { toolCallId: "c1", approved: true },
        { toolCallId: "c2", approved: false, reason: "not allowed" },
      ],
    }),
  );
  await collect(
    client.dispatch(
      "s",
      [
        { id: "u1", role: "user", content: "Delete my files" },
        {
          id: "a1",
          role: "assistant",
          content: "",
          toolCalls: [{ id: "c3", name: "delete_files", arguments: "{}" }],
        },
      ],
      { approvals: [{ toolCallId: "c3", approved: false }], toolChoice: "none" },
    ),
  );
  const [results, dispatch] = requests;
  assert.deepEqual(
    results?.operation.case === "toolResults" &&
      results.operation.value.approvals.map((a) => [a.toolCallId, a.approved, a.reason]),
    [
      ["c1", true, ""],
      ["c2", false, "not allowed"],
    ],
  );
  assert.equal(results?.operation.case === "toolResults" && results.operation.value.results.length, 0);
  assert.equal(dispatch?.operation.case, "dispatch");
  const value = dispatch?.operation.case === "dispatch" ? dispatch.operation.value : undefined;
  assert.deepEqual(
    value?.approvals.map((a) => [a.toolCallId, a.approved]),
    [["c3", false]],
  );
  assert.deepEqual(
    value?.messages[1]?.toolCalls.map((call) => call.id),
    ["c3"],
  );
  assert.equal(dispatch?.toolChoice, "none");
});
