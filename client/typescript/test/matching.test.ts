// The corpus's matching rules as the TypeScript runner applies them (tests/conformance/README.md).
import assert from "node:assert/strict";
import { test } from "node:test";
import { lookup, match } from "../conformance/matching.js";

test("mappings match by their expected keys, lists item by item", () => {
  assert.deepEqual(match({ a: 1 }, { a: 1, b: 2 }), []);
  assert.deepEqual(match({ a: [1, 2] }, { a: [1] }), ["a: expected 2 items, got 1: [1]"]);
  assert.deepEqual(match({ a: { b: "x" } }, { a: { b: "y" } }), ['a.b: expected "x", got "y"']);
});

test("numbers match int64 strings; defaults, absent and present match by presence", () => {
  assert.deepEqual(match({ cursor: 2 }, { cursor: "2" }), []);
  assert.deepEqual(match({ cursor: 0, duplicate: false, routeId: "", list: [], map: {} }, {}), []);
  assert.equal(match({ cursor: 1 }, {}).length, 1);
  assert.deepEqual(match({ usage: "absent" }, {}), []);
  assert.equal(match({ usage: "absent" }, { usage: {} }).length, 1);
  assert.deepEqual(match({ usage: "present" }, { usage: {} }), []);
  assert.equal(match({ usage: "present" }, {}).length, 1);
  assert.equal(match({ flag: true }, { flag: 1 }).length, 1, "booleans are not numbers");
});

test("events are a pattern over the kinds", () => {
  const kinds = { events: ["started", "decision", "delta", "delta", "completed"] };
  assert.deepEqual(match({ events: ["started", "decision", "delta+", "completed"] }, kinds), []);
  assert.deepEqual(
    match({ events: ["started", "decision", "delta*", "failed*", "completed"] }, kinds),
    [],
  );
  assert.equal(match({ events: ["started", "decision", "completed"] }, kinds).length, 1);
  assert.deepEqual(match({ events: [] }, { events: [] }), []);
});

test("captures read dot paths through objects and lists", () => {
  const observed = { messages: [{ id: "m1" }, { id: "m2" }], session: { cursor: "3" } };
  assert.equal(lookup(observed, "messages.1.id"), "m2");
  assert.equal(lookup(observed, "session.cursor"), "3");
  assert.equal(lookup(observed, "messages.2.id"), undefined);
});
