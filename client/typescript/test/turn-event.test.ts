import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ToolWait, type TurnEvent } from "@agentskit/chat-client";
import {
  PendingToolCallSchema,
  type StreamTurnResponse,
  StreamTurnResponseSchema,
  ToolCallDeltaSchema,
  ToolCallEndedSchema,
  ToolCallSchema,
  ToolCallStartedSchema,
  TurnCompletedSchema,
  TurnFailedSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { collectTurn, eventFromResponse, isTerminal } from "../src/turn-event.js";

test("a response becomes an event narrowed by kind, with its envelope", () => {
  const response = create(StreamTurnResponseSchema, {
    sessionId: "s",
    turnId: "t",
    sequence: 3n,
    event: { case: "delta", value: { text: "Hel" } },
  });
  const event = eventFromResponse(response);
  assert.equal(event?.kind, "delta");
  assert.equal(event.kind === "delta" && event.value.text, "Hel");
  assert.deepEqual([event.sessionId, event.turnId, event.sequence], ["s", "t", 3n]);
});

test("an event of a kind this client does not know is no event", () => {
  // What a newer server's event decodes to here: the oneof is unset.
  const response = create(StreamTurnResponseSchema, { sessionId: "s", turnId: "t", sequence: 4n });
  assert.equal(eventFromResponse(response), undefined);
});

function response(sequence: bigint, event: StreamTurnResponse["event"]): StreamTurnResponse {
  return create(StreamTurnResponseSchema, { sessionId: "s", turnId: "t", sequence, event });
}

async function* stream(events: StreamTurnResponse["event"][]): AsyncGenerator<TurnEvent> {
  for (const [index, event] of events.entries()) {
    const found = eventFromResponse(response(BigInt(index + 1), event));
    if (found !== undefined) yield found;
  }
}

test("tool call events narrow to the contract's tool call messages", () => {
  const started = eventFromResponse(
    response(3n, {
      case: "toolCallStarted",
      value: create(ToolCallStartedSchema, { toolCallId: "c1", name: "local_time" }),
    }),
  );
  assert.equal(started?.kind, "toolCallStarted");
  assert.equal(started.kind === "toolCallStarted" && started.value.name, "local_time");
  assert.equal(started.sequence, 3n);
  const delta = eventFromResponse(
    response(4n, {
      case: "toolCallDelta",
      value: create(ToolCallDeltaSchema, { toolCallId: "c1", argumentsDelta: '{"zone"' }),
    }),
  );
  assert.equal(delta?.kind === "toolCallDelta" && delta.value.argumentsDelta, '{"zone"');
  const ended = eventFromResponse(
    response(5n, {
      case: "toolCallEnded",
      value: create(ToolCallEndedSchema, {
        toolCallId: "c1",
        arguments: '{"zone":"UTC"}',
        wait: ToolWait.APPROVAL,
      }),
    }),
  );
  assert.equal(ended?.kind, "toolCallEnded");
  assert.deepEqual(
    ended.kind === "toolCallEnded" && [ended.value.toolCallId, ended.value.arguments, ended.value.wait],
    ["c1", '{"zone":"UTC"}', ToolWait.APPROVAL],
  );
  assert.equal(isTerminal(ended), false, "a tool call does not end the turn");
});

test("a collected turn has the completed event's tool calls and pending calls", async () => {
  const completed = create(TurnCompletedSchema, {
    finishReason: "tool_calls",
    toolCalls: [create(ToolCallSchema, { id: "c1", name: "local_time", arguments: "{}" })],
    pendingToolCalls: [
      create(PendingToolCallSchema, { toolCallId: "c1", name: "local_time", wait: ToolWait.RESULT }),
    ],
  });
  const result = await collectTurn(
    "t",
    stream([
      {
        case: "toolCallStarted",
        value: create(ToolCallStartedSchema, { toolCallId: "c1", name: "local_time" }),
      },
      { case: "toolCallEnded", value: create(ToolCallEndedSchema, { toolCallId: "c1" }) },
      { case: "completed", value: completed },
    ]),
  );
  assert.deepEqual(
    result.toolCalls.map((call) => [call.id, call.name, call.arguments]),
    [["c1", "local_time", "{}"]],
  );
  assert.deepEqual(
    result.pendingToolCalls.map((pending) => [pending.toolCallId, pending.wait]),
    [["c1", ToolWait.RESULT]],
  );
  assert.deepEqual(
    result.events.map((event) => event.kind),
    ["toolCallStarted", "toolCallEnded", "completed"],
  );

  const failed = await collectTurn(
    "t",
    stream([{ case: "failed", value: create(TurnFailedSchema, { code: "model_failed" }) }]),
  );
  assert.deepEqual([failed.toolCalls, failed.pendingToolCalls], [[], []], "none without completed");
});
