// @ag-ui/client's HttpAgent, unchanged, against a live server's AG-UI endpoint.
//
// Environment: AGUI_URL (the HTTP listener), AGUI_TOKEN (a bearer token), AGUI_DEFINITION
// (a definition whose /start command moves idle -> collecting and whose other inputs go to
// the fake model), AGUI_STREAM_TEXT (a user text the fake model answers in several
// chunks), AGUI_FAIL_TEXT (one the fake model fails).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import test from "node:test";

import { HttpAgent } from "@ag-ui/client";

const BASE = process.env.AGUI_URL;
const TOKEN = process.env.AGUI_TOKEN;
const DEFINITION = process.env.AGUI_DEFINITION;
const STREAM_TEXT = process.env.AGUI_STREAM_TEXT;
const FAIL_TEXT = process.env.AGUI_FAIL_TEXT;
const URL = `${BASE}/agui/${DEFINITION}`;

function agent(threadId = `thread-${randomUUID()}`, token = TOKEN) {
  return new HttpAgent({ url: URL, threadId, headers: { Authorization: `Bearer ${token}` } });
}

function say(target, content) {
  const message = { id: `m-${randomUUID()}`, role: "user", content };
  target.addMessage(message);
  return message;
}

// Runs the agent once; every event it saw, in order.
async function runOnce(target, parameters = {}) {
  const events = [];
  const subscriber = { onEvent: ({ event }) => void events.push(event) };
  const outcome = await target.runAgent(parameters, subscriber);
  return { events, outcome, types: events.map((event) => event.type) };
}

function decisions(events) {
  return events.filter((e) => e.type === "CUSTOM" && e.name === "agentskit.decision");
}

test("a deterministic turn shows its decision, snapshot and state transition", async () => {
  const chat = agent();
  say(chat, "/start");
  const { events, types } = await runOnce(chat);
  assert.equal(types[0], "RUN_STARTED");
  assert.equal(types.at(-1), "RUN_FINISHED");
  const snapshot = events.find((e) => e.type === "STATE_SNAPSHOT");
  assert.equal(snapshot.snapshot.state, "idle");
  assert.deepEqual(snapshot.snapshot.commands, [{ route: "start", input: "/start", event: "start" }]);
  assert.ok(types.indexOf("STATE_SNAPSHOT") < types.indexOf("TEXT_MESSAGE_START"));
  const [decision] = decisions(events);
  assert.equal(decision.value.kind, "deterministic");
  assert.equal(decision.value.route, "start");
  assert.equal(decision.value.from, "idle");
  assert.equal(decision.value.to, "collecting");
  assert.equal(decision.value.sessionId, chat.threadId);
  assert.ok(types.includes("STATE_DELTA"));
  // The agent applied the snapshot and the JSON Patch: its state is the machine's.
  assert.equal(chat.state.state, "collecting");
  assert.deepEqual(chat.state.allowedEvents, ["finish", "cancel"]);
  const answer = chat.messages.at(-1);
  assert.equal(answer.role, "assistant");
  assert.equal(answer.content, "What is your name?");
  const start = events.find((e) => e.type === "TEXT_MESSAGE_START");
  assert.equal(answer.id, start.messageId);
});

test("an agentic turn streams the fake model's chunks as text message contents", async () => {
  const chat = agent();
  say(chat, STREAM_TEXT);
  const { events } = await runOnce(chat);
  const contents = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT");
  assert.ok(contents.length >= 2, `${contents.length} contents`);
  const [decision] = decisions(events);
  assert.equal(decision.value.kind, "agentic");
  assert.equal(chat.messages.at(-1).content, contents.map((e) => e.delta).join(""));
  assert.equal(chat.state.state, "idle");
});

test("a regenerate of a client-held thread replays the decision; a repeated run repeats it", async () => {
  const chat = agent();
  say(chat, "/start");
  const first = await runOnce(chat);
  assert.equal(decisions(first.events)[0].value.replayed, false);
  const asked = chat.messages.slice(0, -1);
  // Regenerate: the history without its last answer, under a new run id.
  chat.setMessages(asked);
  const again = await runOnce(chat);
  const [replayed] = decisions(again.events);
  assert.equal(replayed.value.replayed, true);
  assert.equal(replayed.value.to, "collecting");
  assert.equal(chat.state.state, "collecting");
  assert.equal(chat.messages.at(-1).content, "What is your name?");
  // The same run id again: the recorded outcome, nothing run twice.
  const runId = again.events[0].runId;
  chat.setMessages(asked);
  const repeated = await runOnce(chat, { runId });
  assert.equal(repeated.types.at(-1), "RUN_FINISHED");
  assert.deepEqual(decisions(repeated.events)[0].value, replayed.value);
});

test("a server-held thread takes each new message and is hydrated when opened again", async () => {
  const created = await fetch(`${BASE}/agentskit.chat.v1.ChatService/CreateSession`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ definitionId: DEFINITION }),
  });
  assert.equal(created.status, 200);
  const threadId = (await created.json()).session.sessionId;
  const chat = agent(threadId);
  say(chat, "/start");
  await runOnce(chat);
  say(chat, "/name Ada");
  const second = await runOnce(chat);
  assert.equal(decisions(second.events)[0].value.to, "complete");
  assert.equal(chat.messages.at(-1).content, "Welcome, Ada.");
  // Another page opens the thread: no new message, the stored history and state.
  const reopened = agent(threadId);
  const { types } = await runOnce(reopened);
  assert.deepEqual(types, ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
  assert.deepEqual(
    reopened.messages.map((m) => [m.role, m.content]),
    chat.messages.map((m) => [m.role, m.content]),
  );
  assert.equal(reopened.state.state, "complete");
});

test("a failed turn ends its run with RUN_ERROR and the failure's code", async () => {
  const chat = agent();
  say(chat, FAIL_TEXT);
  const errors = [];
  const types = [];
  const subscriber = {
    onRunErrorEvent: ({ event }) => void errors.push(event),
    onEvent: ({ event }) => void types.push(event.type),
  };
  await chat.runAgent({}, subscriber);
  assert.equal(errors.length, 1);
  assert.equal(types.at(-1), "RUN_ERROR");
  assert.ok(!types.includes("RUN_FINISHED"));
  assert.match(errors[0].code, /^model_/);
  assert.ok(errors[0].message.length > 0);
});

test("a bad token is refused before anything runs", async () => {
  const chat = agent(undefined, "not-a-token");
  say(chat, "/start");
  await assert.rejects(chat.runAgent(), (error) => {
    assert.equal(error.status, 401);
    assert.equal(error.payload.error.code, "unauthenticated");
    return true;
  });
});
