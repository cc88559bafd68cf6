// The runner's tool arguments and observations (tests/conformance/README.md, "Steps" and
// "Observations"), against an in-memory server that keeps the requests it received.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import {
  ChatService,
  type StreamTurnRequest,
  StreamTurnResponseSchema,
  ToolWait,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { parseYaml } from "../conformance/corpus.js";
import { Runner, ScenarioError } from "../conformance/runner.js";

type Event = MessageInitShape<typeof StreamTurnResponseSchema>["event"];

const CALL: Event[] = [
  { case: "toolCallStarted", value: { toolCallId: "c1", name: "lookup" } },
  { case: "toolCallDelta", value: { toolCallId: "c1", argumentsDelta: '{"q":' } },
  { case: "toolCallDelta", value: { toolCallId: "c1", argumentsDelta: '"x"}' } },
  {
    case: "toolCallEnded",
    value: { toolCallId: "c1", arguments: '{"q":"x"}', wait: ToolWait.RESULT },
  },
];

/** Answers a submit with one call of `lookup` in two pieces, anything else with text. */
function server(): { requests: StreamTurnRequest[]; run(yaml: string): Promise<void> } {
  const requests: StreamTurnRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ChatService, {
      async *streamTurn(request) {
        requests.push(request);
        const calls = request.operation.case === "submit";
        const events: Event[] = [
          { case: "started", value: {} },
          ...(calls ? CALL : [{ case: "delta", value: { text: "done" } } as const]),
          { case: "completed", value: { finishReason: calls ? "tool_calls" : "stop" } },
        ];
        for (const [index, event] of events.entries()) {
          yield create(StreamTurnResponseSchema, {
            sessionId: request.sessionId,
            turnId: request.turnId,
            sequence: BigInt(index + 1),
            event,
          });
        }
      },
    });
  });
  return {
    requests,
    run(yaml: string) {
      const body = parseYaml(yaml) as { [key: string]: unknown };
      return new Runner(transport, { tenant: "", limited: "" }, { name: "tools", body }).run();
    },
  };
}

test("stream_turn sends tools, tool results, approvals and tool messages", async () => {
  const { requests, run } = server();
  await run(`
steps:
  - stream_turn:
      session: s
      submit: {content: look it up}
      tools:
        - {name: lookup, description: Look up, parameters: {type: object, properties: {q: {type: string, maxLength: 5}}}}
        - {name: clock}
      tool_choice: auto
      parallel_tool_calls: true
    expect:
      events: [started, tool_call_started, tool_call_delta+, tool_call_ended, completed]
      toolCalls: [{toolCallId: c1, name: lookup, arguments: '{"q":"x"}', ended: {wait: TOOL_WAIT_RESULT}}]
      completed: {finishReason: tool_calls}
  - stream_turn:
      session: s
      tool_results:
        results: [{tool_call_id: c1, content: found, message_id: m9}]
        approvals: [{tool_call_id: c2, approved: false, reason: no}]
    expect:
      events: [started, delta, completed]
      toolCalls: absent
  - stream_turn:
      session: s
      dispatch:
        messages:
          - {id: a1, role: assistant, content: "", tool_calls: [{id: c3, name: lookup, arguments: "{}"}]}
          - {id: t1, role: tool, content: found, tool_call_id: c3}
        approvals: [{tool_call_id: c4, approved: true}]
      tool_choice: none
      parallel_tool_calls: false
`);
  const [submit, results, dispatch] = requests;
  assert.deepEqual(
    submit?.tools.map((tool) => [tool.name, tool.description, tool.parametersJson]),
    [
      [
        "lookup",
        "Look up",
        '{"type":"object","properties":{"q":{"type":"string","maxLength":5}}}',
      ],
      ["clock", "", ""],
    ],
  );
  assert.deepEqual([submit?.toolChoice, submit?.parallelToolCalls], ["auto", true]);
  assert.equal(results?.operation.case, "toolResults");
  if (results?.operation.case === "toolResults") {
    const value = results.operation.value;
    assert.deepEqual(
      value.results.map((r) => [r.toolCallId, r.content, r.messageId]),
      [["c1", "found", "m9"]],
    );
    assert.deepEqual(
      value.approvals.map((a) => [a.toolCallId, a.approved, a.reason]),
      [["c2", false, "no"]],
    );
  }
  assert.deepEqual([results?.tools, results?.parallelToolCalls], [[], undefined], "none given");
  assert.equal(dispatch?.operation.case, "dispatch");
  if (dispatch?.operation.case === "dispatch") {
    const [assistant, tool] = dispatch.operation.value.messages;
    assert.deepEqual(
      assistant?.toolCalls.map((call) => [call.id, call.name, call.arguments]),
      [["c3", "lookup", "{}"]],
    );
    assert.equal(tool?.toolCallId, "c3");
    assert.deepEqual(
      dispatch.operation.value.approvals.map((a) => [a.toolCallId, a.approved]),
      [["c4", true]],
    );
  }
  assert.deepEqual([dispatch?.toolChoice, dispatch?.parallelToolCalls], ["none", false]);
});

test("malformed tool arguments are scenario errors", async () => {
  const { requests, run } = server();
  const turn = (extra: string) => `
steps:
  - stream_turn:
      session: s
      ${extra}
`;
  const submit = "submit: {content: x}\n      ";
  const cases: [string, RegExp][] = [
    [`${submit}parallel_tool_calls: yes please`, /parallel_tool_calls must be a boolean/],
    [`${submit}tools: {name: lookup}`, /tools must be a list/],
    [`${submit}tools: [{name: lookup, parameters: [1]}]`, /parameters must be a mapping/],
    ["tool_results: {approvals: [{tool_call_id: c1}]}", /an approval needs approved/],
    ["tool_results: {results: [{tool_call_id: c1, content: 42}]}", /content must be a string/],
  ];
  for (const [extra, message] of cases) {
    await assert.rejects(run(turn(extra)), (error: unknown) => {
      assert.ok(error instanceof ScenarioError);
      assert.match(error.message, message);
      return true;
    });
  }
  assert.equal(requests.length, 0, "nothing is sent for a malformed step");
});
