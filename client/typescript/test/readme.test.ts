// The README's snippets are the example files the build compiles and the tests run.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

const root = new URL("../../", import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, root), "utf8");

test("the README shows the quickstart, tools and retry examples exactly as they are built", () => {
  const blocks = [...read("README.md").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.deepEqual(blocks, [
    read("examples/quickstart.ts"),
    read("examples/tools.ts"),
    read("examples/retry.ts"),
  ]);
});
