// The runner's observations of streams (tests/conformance/README.md, "Observations").
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ToolWait, type TurnEvent, type WatchSessionItem } from "@agentskit/chat-client";
import {
  SessionSchema,
  type StreamTurnResponse,
  StreamTurnResponseSchema,
  ToolCallDeltaSchema,
  ToolCallEndedSchema,
  ToolCallStartedSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { SessionObservation, TurnObservation } from "../conformance/observations.js";
import { turnEvents } from "./scripted-server.js";
import { eventFromResponse } from "../src/turn-event.js";

function events(turnId: string): TurnEvent[] {
  return turnEvents("s", turnId).flatMap((response) => eventFromResponse(response) ?? []);
}

test("a turn observation has its sequences, the last one, and gapless for a watch", () => {
  const all = events("t");
  const stream = new TurnObservation();
  assert.equal("lastSequence" in stream.observation, false, "absent with no events");
  assert.deepEqual(stream.observation["sequences"], []);
  for (const event of all) stream.add(event);
  assert.deepEqual(stream.observation["sequences"], [1, 2, 3, 4, 5, 6]);
  assert.equal(stream.observation["lastSequence"], 6);
  assert.equal("gapless" in stream.observation, false, "only a watch_turn has gapless");

  const watch = (after: bigint, seen: TurnEvent[]): unknown => {
    const observation = new TurnObservation(after);
    for (const event of seen) observation.add(event);
    return observation.observation["gapless"];
  };
  assert.equal(watch(2n, all.slice(2)), true);
  assert.equal(watch(1n, all.slice(2)), false, "it must start at after_sequence + 1");
  assert.equal(watch(0n, [...all.slice(0, 2), ...all.slice(3)]), false, "a gap");
  assert.equal(watch(0n, all.slice(0, 5)), false, "no terminal event");
  assert.equal(watch(6n, []), false, "no events");
});

test("a session observation lists sessions, turns, and the events of until_turn", () => {
  const observation = new SessionObservation("b");
  const session = create(SessionSchema, { sessionId: "s", cursor: 2n });
  const items: WatchSessionItem[] = [
    { kind: "session", session },
    { kind: "heartbeat", time: undefined },
    ...events("a").map((event) => ({ kind: "event" as const, event })),
    { kind: "session", session },
    ...events("b").map((event) => ({ kind: "event" as const, event })),
  ];
  const done = items.map((item) => observation.add(item));
  assert.equal(done.indexOf(true), items.length - 1, "done at until_turn's terminal event");
  const observed = observation.observation;
  assert.deepEqual(observed["sessions"], [
    { sessionId: "s", cursor: "2" },
    { sessionId: "s", cursor: "2" },
  ]);
  assert.deepEqual(observed["turns"], ["a", "b"]);
  assert.deepEqual(observed["events"], ["started", "decision", "delta", "delta", "delta", "completed"]);
  assert.deepEqual(observed["sequences"], [1, 2, 3, 4, 5, 6]);
  assert.equal(observed["text"], "Hello there.");
  assert.equal(observed["lastSequence"], 6);
});

test("tool call events are observed as toolCalls, in the order the calls started", () => {
  const turn = new TurnObservation();
  const at = (sequence: number, event: StreamTurnResponse["event"]): TurnEvent => {
    const response = create(StreamTurnResponseSchema, {
      sessionId: "s",
      turnId: "t",
      sequence: BigInt(sequence),
      event,
    });
    return eventFromResponse(response) as TurnEvent;
  };
  const started = (id: string, name: string) =>
    ({
      case: "toolCallStarted",
      value: create(ToolCallStartedSchema, { toolCallId: id, name }),
    }) as const;
  const delta = (id: string, piece: string) =>
    ({
      case: "toolCallDelta",
      value: create(ToolCallDeltaSchema, { toolCallId: id, argumentsDelta: piece }),
    }) as const;
  const ended = (id: string, args: string, wait: ToolWait) =>
    ({
      case: "toolCallEnded",
      value: create(ToolCallEndedSchema, { toolCallId: id, arguments: args, wait }),
    }) as const;
  const stream = [
    started("a", "weather"),
    started("b", "clock"),
    delta("a", '{"city"'),
    delta("b", "{}"),
    delta("a", ':"Paris"}'),
    ended("a", '{"city":"Paris"}', ToolWait.RESULT),
    ended("b", "{}", ToolWait.APPROVAL),
  ];
  stream.forEach((event, index) => turn.add(at(index + 1, event)));
  const observed = turn.observation;
  assert.deepEqual(observed["events"], [
    "tool_call_started",
    "tool_call_started",
    "tool_call_delta",
    "tool_call_delta",
    "tool_call_delta",
    "tool_call_ended",
    "tool_call_ended",
  ]);
  assert.deepEqual(observed["toolCalls"], [
    {
      toolCallId: "a",
      name: "weather",
      arguments: '{"city":"Paris"}',
      ended: { toolCallId: "a", arguments: '{"city":"Paris"}', wait: "TOOL_WAIT_RESULT" },
    },
    {
      toolCallId: "b",
      name: "clock",
      arguments: "{}",
      ended: { toolCallId: "b", arguments: "{}", wait: "TOOL_WAIT_APPROVAL" },
    },
  ]);

  const late = new TurnObservation(3n); // a watch from after the call started
  late.add(at(4, delta("a", "}")));
  late.add(at(5, ended("a", "{}", ToolWait.RESULT)));
  assert.deepEqual(late.observation["events"], ["tool_call_delta", "tool_call_ended"]);
  assert.equal("toolCalls" in late.observation, false, "one item per tool_call_started seen");

  const plain = new TurnObservation();
  for (const event of events("t")) plain.add(event);
  assert.equal("toolCalls" in plain.observation, false, "absent without tool calls");
});
