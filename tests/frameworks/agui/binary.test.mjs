// The AG-UI binary encoding (application/vnd.ag-ui.event+proto) of a live run, decoded by
// the official @ag-ui/proto decoder, and read by HttpAgent's own binary parser.
//
// Environment: as http_agent.test.mjs.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import test from "node:test";

import { HttpAgent } from "@ag-ui/client";
import { EventEncoder } from "@ag-ui/encoder";
import { AGUI_MEDIA_TYPE, decode } from "@ag-ui/proto";

const BASE = process.env.AGUI_URL;
const TOKEN = process.env.AGUI_TOKEN;
const DEFINITION = process.env.AGUI_DEFINITION;
const STREAM_TEXT = process.env.AGUI_STREAM_TEXT;
const URL = `${BASE}/agui/${DEFINITION}`;

function frames(bytes) {
  const events = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at < bytes.length) {
    const length = view.getUint32(at, false);
    events.push(decode(bytes.subarray(at + 4, at + 4 + length)));
    at += 4 + length;
  }
  return events;
}

async function post(body, accept) {
  return fetch(URL, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: accept, Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(body),
  });
}

function input(threadId, content) {
  return {
    threadId,
    runId: `run-${randomUUID()}`,
    state: {},
    messages: [{ id: `m-${randomUUID()}`, role: "user", content }],
    tools: [],
    context: [],
    forwardedProps: {},
  };
}

test("a run in the binary encoding decodes with @ag-ui/proto to the SSE run's events", async () => {
  // The media type the official encoder negotiates.
  assert.equal(new EventEncoder({ accept: AGUI_MEDIA_TYPE }).getContentType(), AGUI_MEDIA_TYPE);
  const threadId = `thread-${randomUUID()}`;
  const binary = await post(input(threadId, "/start"), AGUI_MEDIA_TYPE);
  assert.equal(binary.status, 200);
  assert.equal(binary.headers.get("content-type"), AGUI_MEDIA_TYPE);
  const events = frames(new Uint8Array(await binary.arrayBuffer()));
  assert.deepEqual(
    events.map((e) => e.type),
    [
      "RUN_STARTED",
      "STATE_SNAPSHOT",
      "CUSTOM",
      "TEXT_MESSAGE_START",
      "TEXT_MESSAGE_CONTENT",
      "TEXT_MESSAGE_END",
      "STATE_DELTA",
      "RUN_FINISHED",
    ],
  );
  assert.equal(events[0].threadId, threadId);
  assert.deepEqual(events[1].snapshot.commands, [{ route: "start", input: "/start", event: "start" }]);
  assert.equal(events[2].name, "agentskit.decision");
  assert.equal(events[2].value.kind, "deterministic");
  assert.equal(events[2].value.replayed, false);
  assert.equal(events[4].delta, "What is your name?");
  assert.equal(events[6].delta.find((op) => op.path === "/state").value, "collecting");
  // The same input on a new thread over SSE says the same.
  const sse = await post(input(`thread-${randomUUID()}`, "/start"), "text/event-stream");
  const text = await sse.text();
  const json = text
    .split("\n\n")
    .filter((block) => block.includes("data:"))
    .map((block) => JSON.parse(block.split("\n").find((l) => l.startsWith("data:")).slice(5)));
  assert.deepEqual(
    json.map((e) => e.type),
    events.map((e) => e.type),
  );
  assert.deepEqual(json[1].snapshot, events[1].snapshot);
  assert.deepEqual(json[6].delta, events[6].delta);
  assert.equal(json[4].delta, events[4].delta);
});

test("HttpAgent reads a binary answer with its own parser", async () => {
  const viaProto = (url, init) =>
    fetch(url, { ...init, headers: { ...init.headers, Accept: AGUI_MEDIA_TYPE } });
  const chat = new HttpAgent({
    url: URL,
    threadId: `thread-${randomUUID()}`,
    headers: { Authorization: `Bearer ${TOKEN}` },
    fetch: viaProto,
  });
  chat.addMessage({ id: `m-${randomUUID()}`, role: "user", content: STREAM_TEXT });
  const contents = [];
  const formats = [];
  await chat.runAgent(
    {},
    {
      onTextMessageContentEvent: ({ event }) => void contents.push(event.delta),
      onRunStartedEvent: () => void formats.push("started"),
    },
  );
  assert.ok(contents.length >= 2);
  assert.equal(chat.messages.at(-1).content, contents.join(""));
  assert.deepEqual(formats, ["started"]);
});

test("a reopened server-held thread's history decodes from the binary encoding", async () => {
  const created = await fetch(`${BASE}/agentskit.chat.v1.ChatService/CreateSession`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ definitionId: DEFINITION }),
  });
  const threadId = (await created.json()).session.sessionId;
  const asked = input(threadId, "/start");
  assert.equal((await post(asked, AGUI_MEDIA_TYPE)).status, 200);
  const reopened = await post({ ...input(threadId, "unused"), messages: [] }, AGUI_MEDIA_TYPE);
  const events = frames(new Uint8Array(await reopened.arrayBuffer()));
  assert.deepEqual(
    events.map((e) => e.type),
    ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"],
  );
  assert.deepEqual(
    events[2].messages.map((m) => [m.role, m.content]),
    [
      ["user", "/start"],
      ["assistant", "What is your name?"],
    ],
  );
  assert.equal(events[2].messages[0].id, asked.messages[0].id);
  assert.equal(events[1].snapshot.state, "collecting");
});
