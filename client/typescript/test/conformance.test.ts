// The conformance corpus (tests/conformance) through the TypeScript client: one test per
// scenario file, against the live server the harness starts.
import { test } from "node:test";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { loadScenarios } from "../conformance/corpus.js";
import { Runner } from "../conformance/runner.js";

const TARGET = process.env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"];
const TOKENS = {
  tenant: process.env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"] ?? "",
  limited: process.env["AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN"] ?? "",
};
const SKIP =
  "no live server: run `python -m tests.conformance.harness` and set the variables it prints";

const transport = TARGET === undefined ? undefined : createNodeTransport(TARGET);

for (const scenario of loadScenarios()) {
  test(scenario.name, { skip: transport === undefined ? SKIP : false }, async () => {
    if (transport !== undefined) {
      await new Runner(transport, TOKENS, scenario).run();
    }
  });
}
