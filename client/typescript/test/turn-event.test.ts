import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { StreamTurnResponseSchema } from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { eventFromResponse } from "../src/turn-event.js";

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
