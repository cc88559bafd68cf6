// The conformance corpus (tests/conformance) through the TypeScript client: one test per
// scenario file, against the live server the harness starts.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { parse } from "yaml";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { Runner, type Scenario } from "../conformance/runner.js";

const TARGET = process.env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"];
const TOKENS = {
  tenant: process.env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"] ?? "",
  limited: process.env["AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN"] ?? "",
};
const CORPUS =
  process.env["AGENTSKIT_CHAT_CONFORMANCE_DIR"] ??
  fileURLToPath(new URL("../../../../tests/conformance/", import.meta.url));
const SKIP =
  "no live server: run `python -m tests.conformance.harness` and set the variables it prints";

function loadScenarios(): Scenario[] {
  const directory = join(CORPUS, "scenarios");
  return readdirSync(directory)
    .filter((file) => file.endsWith(".yaml"))
    .sort()
    .map((file) => ({
      name: file.slice(0, -".yaml".length),
      body: parse(readFileSync(join(directory, file), "utf8")) as Scenario["body"],
    }));
}

const transport = TARGET === undefined ? undefined : createNodeTransport(TARGET);

for (const scenario of loadScenarios()) {
  test(scenario.name, { skip: transport === undefined ? SKIP : false }, async () => {
    if (transport !== undefined) {
      await new Runner(transport, TOKENS, scenario).run();
    }
  });
}
