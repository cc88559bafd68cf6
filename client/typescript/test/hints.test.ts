import assert from "node:assert/strict";
import { test } from "node:test";
import { commandHints, eligibleRoutes } from "@agentskit/chat-client";

const routes = [
  { id: "start", event: "start", states: [], inputText: "/start" },
  { id: "name", event: "finish", states: ["collecting"], inputText: "" },
  { id: "cancel", event: "cancel", states: ["collecting"], inputText: "/cancel" },
  { id: "cancel-again", event: "cancel", states: [], inputText: "/cancel" },
  { id: "restart", event: "restart", states: ["complete"], inputText: "/restart" },
];

test("a route is eligible when its event is allowed and its states include the current one", () => {
  const collecting = { state: "collecting", allowedEvents: ["finish", "cancel"] };
  assert.deepEqual(
    eligibleRoutes(routes, collecting).map((route) => route.id),
    ["name", "cancel", "cancel-again"],
  );
  const idle = { state: "idle", allowedEvents: ["start", "cancel"] };
  assert.deepEqual(
    eligibleRoutes(routes, idle).map((route) => route.id),
    ["start", "cancel-again"],
  );
});

test("command hints are the eligible routes' input texts, in order, each once", () => {
  assert.deepEqual(
    commandHints(routes, { state: "collecting", allowedEvents: ["finish", "cancel"] }),
    ["/cancel"],
  );
  assert.deepEqual(commandHints(routes, { state: "complete", allowedEvents: ["restart"] }), [
    "/restart",
  ]);
  assert.deepEqual(commandHints(routes, { state: "complete", allowedEvents: [] }), []);
});
