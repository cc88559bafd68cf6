// The conformance runner's own rules (tests/conformance/README.md, "Steps"), checked with
// small scenarios against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { Runner, ScenarioError } from "../conformance/runner.js";
import { SKIP_WITHOUT_SERVER, TARGET, TOKEN } from "../conformance/live.js";

const skip = SKIP_WITHOUT_SERVER;
// A model reply of the corpus (cancel-frees-session.yaml): 1.5 s before each chunk.
const SLOW = "conformance: an answer to abandon";

function run(steps: unknown[]): Promise<void> {
  const transport = createNodeTransport(TARGET ?? "");
  const scenario = { name: "runner", body: { definition: "conformance", steps } };
  return new Runner(transport, { tenant: TOKEN ?? "", limited: "" }, scenario).run();
}

test("a cancel keeps an error the stream had before it", { skip }, async () => {
  const late: unknown[] = [
    { create_session: { as: "s" } },
    {
      stream_turn: { session: "$s", submit: { content: SLOW }, background: "slow" },
      deadline_ms: 300,
    },
    { ended: "slow" },
    { cancel: "slow" },
  ];
  await assert.rejects(run(late), (error: unknown) => {
    assert.ok(error instanceof ScenarioError);
    assert.match(error.message, /unexpected error .*DEADLINE_EXCEEDED/);
    return true;
  });
  const expected = structuredClone(late);
  expected[1] = { ...(expected[1] as object), expect: { error: { code: "DEADLINE_EXCEEDED" } } };
  expected[3] = { cancel: "slow", expect: { error: { code: "DEADLINE_EXCEEDED" } } };
  await run(expected);
  const cancelled = [
    { create_session: { as: "s" } },
    { stream_turn: { session: "$s", submit: { content: SLOW }, background: "slow" } },
    { cancel: "slow", expect: { events: ["started", "decision*"] } },
  ];
  await run(cancelled); // the cancellation itself is no error of the observation
});

test("integer arguments take decimal strings such as a captured cursor", { skip }, async () => {
  const start = [
    { create_session: { as: "s" } },
    {
      stream_turn: { session: "$s", submit: { content: "/start" } },
      capture: { c: "completed.cursor" },
    },
  ];
  await run([
    ...start,
    {
      delete_session: { session: "$s", expected_cursor: "7" },
      expect: { error: { code: "ABORTED", reason: "ERROR_REASON_CONFLICT" } },
    },
    { list_turns: { session: "$s", page_size: "1" }, expect: { turns: [{ turnId: "present" }] } },
    { delete_session: { session: "$s", expected_cursor: "$c" } },
  ]);
  for (const bad of ["1.5", "one", 1.5, true]) {
    await assert.rejects(
      run([...start, { delete_session: { session: "$s", expected_cursor: bad } }]),
      /expected_cursor must be an integer or a decimal string/,
    );
  }
});

test("revision arguments are integers, a captured one included", { skip }, async () => {
  await run([
    {
      create_session: { as: "s", definition_id: "conformance-revisions", definition_revision: "1" },
      capture: { r: "session.definitionRevision" },
    },
    {
      get_definition: { definition_id: "conformance-revisions", revision: "$r" },
      expect: {
        definition: {
          revision: 1n,
          states: [{ name: "idle" }, { name: "asking" }, { name: "done" }],
        },
      },
    },
  ]);
  for (const step of [
    { create_session: { definition_id: "conformance-revisions", definition_revision: "one" } },
    { get_definition: { definition_id: "conformance-revisions", revision: 1.5 } },
  ]) {
    await assert.rejects(run([step]), /revision must be an integer or a decimal string/);
  }
});

test("only a whole $name string is a captured value; $5 is literal", { skip }, async () => {
  await run([
    { get_definition: { definition_id: "$5" }, expect: { error: { code: "NOT_FOUND" } } },
    { get_definition: { definition_id: "a $s" }, expect: { error: { code: "NOT_FOUND" } } },
  ]);
  await assert.rejects(run([{ get_session: { session: "$never" } }]), /\$never was never captured/);
});

test("a background step takes no capture", { skip }, async () => {
  const steps = [
    { create_session: { as: "s" } },
    {
      stream_turn: { session: "$s", submit: { content: "/start" }, background: "b" },
      capture: { t: "started.turnId" },
    },
  ];
  await assert.rejects(run(steps), /a background step takes no capture/);
});
