// The corpus's matching rules as the TypeScript runner applies them (tests/conformance/README.md).
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { CORPUS, parseYaml, readYaml } from "../conformance/corpus.js";
import { type Json, lookup, match } from "../conformance/matching.js";

interface Case {
  readonly name: string;
  readonly expected: unknown;
  readonly actual: Json;
  readonly matches: boolean;
}

test("every case of matching-cases.yaml gets its verdict", () => {
  const cases = readYaml(join(CORPUS, "matching-cases.yaml")) as Case[];
  assert.ok(cases.length > 0, "matching-cases.yaml lists no case");
  const wrong = cases
    .filter((item) => (match(item.expected, item.actual).length === 0) !== item.matches)
    .map((item) => item.name);
  assert.deepEqual(wrong, []);
});

test("mappings match by their expected keys, lists item by item", () => {
  assert.deepEqual(match({ a: 1n }, { a: 1, b: 2 }), []);
  assert.deepEqual(match({ a: [1n, 2n] }, { a: [1] }), ["a: expected 2 items, got 1: [1]"]);
  assert.deepEqual(match({ a: { b: "x" } }, { a: { b: "y" } }), ['a.b: expected "x", got "y"']);
});

test("numbers match int64 strings; defaults, absent and present match by presence", () => {
  assert.deepEqual(match({ cursor: 2n }, { cursor: "2" }), []);
  assert.deepEqual(match({ cursor: "2" }, { cursor: 2 }), [], "a captured cursor");
  assert.deepEqual(match({ cursor: 0n, duplicate: false, routeId: "", list: [], map: {} }, {}), []);
  assert.equal(match({ cursor: 1n }, {}).length, 1);
  assert.deepEqual(match({ usage: "absent" }, {}), []);
  assert.equal(match({ usage: "absent" }, { usage: {} }).length, 1);
  assert.deepEqual(match({ usage: "present" }, { usage: {} }), []);
  assert.equal(match({ usage: "present" }, {}).length, 1);
  assert.equal(match({ flag: true }, { flag: 1 }).length, 1, "booleans are not numbers");
});

test("an integer and a float stay apart as in the Python runner", () => {
  const expected = parseYaml("{zero: 0, float: 0.0}") as { [key: string]: unknown };
  assert.deepEqual(expected, { zero: 0n, float: 0 });
  assert.deepEqual(match({ score: expected["zero"] }, {}), []);
  assert.equal(match({ score: expected["float"] }, {}).length, 1, "0.0 is not a default");
  assert.deepEqual(match({ score: 2 }, { score: 2 }), [], "2.0 equals the number 2");
  assert.deepEqual(match({ score: 2.5 }, { score: "2.5" }), []);
  assert.equal(match({ score: 2 }, { score: "2" }).length, 1, "2.0 is written 2.0");
});

test("captures read dot paths through objects and lists", () => {
  const observed = { messages: [{ id: "m1" }, { id: "m2" }], session: { cursor: "3" } };
  assert.equal(lookup(observed, "messages.1.id"), "m2");
  assert.equal(lookup(observed, "session.cursor"), "3");
  assert.equal(lookup(observed, "messages.2.id"), undefined);
});
