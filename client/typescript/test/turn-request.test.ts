import assert from "node:assert/strict";
import { test } from "node:test";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { ChatClient, ChatError, DisconnectMode, newTurnId, Role } from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { StreamTurnRequestSchema } from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { toInt64, toStreamTurnRequest, turnIdFrom } from "../src/turn-request.js";

test("turn ids are 32 fresh hex digits", () => {
  const ids = new Set(Array.from({ length: 100 }, newTurnId));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
});

test("without crypto.randomUUID, turn ids come from getRandomValues", () => {
  // Outside secure browser contexts and on Hermes, Web Crypto has no randomUUID.
  const source = { getRandomValues: globalThis.crypto.getRandomValues.bind(globalThis.crypto) };
  const ids = new Set(Array.from({ length: 100 }, () => turnIdFrom(source)));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.match(id, /^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
  assert.throws(() => turnIdFrom(undefined), /pass turnId/);
});

test("invalid arguments are TypeError or RangeError before anything is sent", async () => {
  // Nothing listens on port 1: a call that were sent would fail as UNAVAILABLE.
  const client = new ChatClient(createNodeTransport("127.0.0.1:1"));
  await assert.rejects(client.deleteSession("s", { expectedCursor: 1.5 }), RangeError);
  await assert.rejects(client.truncate("s", undefined, { expectedCursor: 2 ** 60 }), RangeError);
  const robot = client.dispatch("s", [{ id: "m", role: "robot" as "user", content: "hi" }]);
  await assert.rejects(robot.next(), RangeError);
  await assert.rejects(client.getSession("s"), ChatError, "a sent call fails as ChatError");
});

test("cursors are accepted as safe integers or bigints and nothing else", () => {
  assert.equal(toInt64(3), 3n);
  assert.equal(toInt64(2n ** 60n), 2n ** 60n);
  assert.throws(() => toInt64(1.5, "expectedCursor"), /expectedCursor must be an integer/);
  assert.throws(() => toInt64(2 ** 60), RangeError);
});

test("a turn request carries its operation, turn id and cursor", () => {
  const submit = toStreamTurnRequest(
    {
      sessionId: "s",
      operation: { case: "submit", value: { content: "hi", messageId: "m1" } },
      expectedCursor: 2,
    },
    "t1",
  );
  assert.equal(submit.sessionId, "s");
  assert.equal(submit.turnId, "t1");
  assert.equal(submit.expectedCursor, 2n);
  assert.deepEqual(submit.operation.case, "submit");
  assert.equal(submit.operation.value?.$typeName, "agentskit.chat.v1.SubmitOperation");
  const retry = toStreamTurnRequest(
    { sessionId: "s", operation: { case: "retry", value: {} } },
    "t2",
  );
  assert.equal(retry.expectedCursor, undefined, "no cursor means no guard");
  assert.equal(retry.operation.case, "retry");
});

test("dispatch takes roles by name or value", () => {
  const request = toStreamTurnRequest(
    {
      sessionId: "s",
      operation: {
        case: "dispatch",
        value: {
          messages: [
            { id: "1", role: "system", content: "be brief" },
            { id: "2", role: Role.USER, content: "hello" },
            { id: "3", role: "assistant", content: "hi" },
          ],
        },
      },
    },
    "t",
  );
  assert.equal(request.operation.case, "dispatch");
  const roles =
    request.operation.case === "dispatch"
      ? request.operation.value.messages.map((m) => m.role)
      : [];
  assert.deepEqual(roles, [Role.SYSTEM, Role.USER, Role.ASSISTANT]);
  assert.throws(
    () =>
      toStreamTurnRequest(
        {
          sessionId: "s",
          operation: {
            case: "dispatch",
            value: { messages: [{ id: "1", role: "robot" as "user", content: "" }] },
          },
        },
        "t",
      ),
    /unknown role: robot/,
  );
});

test("bad connection settings are refused up front", () => {
  assert.throws(() => createNodeTransport("http://host:1"), /host:port/);
  assert.throws(
    () => createNodeTransport("host:1", { tls: { clientCertificate: "pem" } }),
    /go together/,
  );
  const transport = createNodeTransport("127.0.0.1:1", { tls: true });
  assert.throws(() => new ChatClient(transport, { token: "two words" }), /without whitespace/);
  assert.doesNotThrow(() => new ChatClient(transport, { token: "" }), "empty means no token");
});

test("onDisconnect is sent by name or value, and not at all when omitted", async () => {
  const operation = { case: "submit", value: { content: "hi" } } as const;
  const wire = (onDisconnect?: "continue" | "cancel" | DisconnectMode) =>
    toStreamTurnRequest({ sessionId: "s", operation, onDisconnect }, "t").onDisconnect;
  assert.equal(wire(), DisconnectMode.UNSPECIFIED);
  assert.equal(wire("continue"), DisconnectMode.CONTINUE);
  assert.equal(wire("cancel"), DisconnectMode.CANCEL);
  assert.equal(wire(DisconnectMode.CONTINUE), DisconnectMode.CONTINUE);
  assert.throws(() => wire("later" as "cancel"), /unknown disconnect mode/);
  const client = new ChatClient(createNodeTransport("127.0.0.1:1"));
  await assert.rejects(client.watchTurn("s", "t", { afterSequence: -1 }).next(), RangeError);
  await assert.rejects(client.watchTurn("s", "t", { afterSequence: 0.5 }).next(), RangeError);
  await assert.rejects(client.watchSession("s", { afterCursor: 0.5 }).next(), RangeError);
});

test("tools, tool choice and parallel calls are sent as declared, and nothing when omitted", () => {
  const operation = { case: "submit", value: { content: "What time is it?" } } as const;
  const request = toStreamTurnRequest(
    {
      sessionId: "s",
      operation,
      tools: [
        {
          name: "local_time",
          description: "The time where the user is",
          parameters: { type: "object", properties: { zone: { type: "string" } } },
        },
        { name: "ping" },
      ],
      toolChoice: "required",
      parallelToolCalls: false,
    },
    "t",
  );
  assert.deepEqual(
    request.tools.map((tool) => [tool.name, tool.description, tool.parametersJson]),
    [
      [
        "local_time",
        "The time where the user is",
        '{"type":"object","properties":{"zone":{"type":"string"}}}',
      ],
      ["ping", "", ""],
    ],
  );
  assert.equal(request.toolChoice, "required");
  assert.equal(request.parallelToolCalls, false, "false is sent, not left out");
  const plain = toStreamTurnRequest({ sessionId: "s", operation }, "t");
  assert.deepEqual([plain.tools, plain.toolChoice, plain.parallelToolCalls], [[], "", undefined]);
  const wire = toBinary(StreamTurnRequestSchema, plain);
  assert.equal(fromBinary(StreamTurnRequestSchema, wire).parallelToolCalls, undefined);
});

test("toolResults carries results and approvals", () => {
  const request = toStreamTurnRequest(
    {
      sessionId: "s",
      operation: {
        case: "toolResults",
        value: {
          results: [
            { toolCallId: "c1", content: '{"time":"09:00"}' },
            { toolCallId: "c2", content: "ok", messageId: "m9" },
          ],
          approvals: [
            { toolCallId: "c3", approved: true },
            { toolCallId: "c4", approved: false, reason: "not now" },
          ],
        },
      },
    },
    "t",
  );
  assert.equal(request.operation.case, "toolResults");
  const value = request.operation.case === "toolResults" ? request.operation.value : undefined;
  assert.deepEqual(
    value?.results.map((r) => [r.toolCallId, r.content, r.messageId]),
    [
      ["c1", '{"time":"09:00"}', ""],
      ["c2", "ok", "m9"],
    ],
  );
  assert.deepEqual(
    value?.approvals.map((a) => [a.toolCallId, a.approved, a.reason]),
    [
      ["c3", true, ""],
      ["c4", false, "not now"],
    ],
  );
  const empty = toStreamTurnRequest(
    { sessionId: "s", operation: { case: "toolResults", value: {} } },
    "t",
  );
  assert.equal(empty.operation.case, "toolResults", "the operation is set even when empty");
});

test("dispatch carries tool calls, tool messages and approvals", () => {
  const request = toStreamTurnRequest(
    {
      sessionId: "s",
      operation: {
        case: "dispatch",
        value: {
          messages: [
            { id: "1", role: "user", content: "What time is it?" },
            {
              id: "2",
              role: "assistant",
              content: "",
              toolCalls: [{ id: "c1", name: "local_time", arguments: '{"zone":"UTC"}' }],
            },
            { id: "3", role: "tool", content: "09:00", toolCallId: "c1" },
          ],
          approvals: [{ toolCallId: "c2", approved: false, reason: "no" }],
        },
      },
    },
    "t",
  );
  assert.equal(request.operation.case, "dispatch");
  const value = request.operation.case === "dispatch" ? request.operation.value : undefined;
  const [user, assistant, tool] = value?.messages ?? [];
  assert.deepEqual([user?.toolCalls, user?.toolCallId], [[], ""]);
  assert.deepEqual(
    assistant?.toolCalls.map((call) => [call.id, call.name, call.arguments]),
    [["c1", "local_time", '{"zone":"UTC"}']],
  );
  assert.deepEqual([tool?.role, tool?.toolCallId, tool?.content], [Role.TOOL, "c1", "09:00"]);
  assert.deepEqual(
    value?.approvals.map((a) => [a.toolCallId, a.approved, a.reason]),
    [["c2", false, "no"]],
  );
});
