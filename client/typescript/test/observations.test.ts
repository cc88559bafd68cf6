// The runner's observations of streams (tests/conformance/README.md, "Observations").
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { TurnEvent, WatchSessionItem } from "@agentskit/chat-client";
import { SessionSchema } from "../src/gen/agentskit/chat/v1/chat_pb.js";
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
