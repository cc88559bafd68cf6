// Turns that outlive their connection, against the live server: a continued turn whose
// connection is cut (a TCP proxy in front of the server) reattaches by itself over gRPC,
// Connect and gRPC-Web; watchTurn, cancelTurn and watchSession through the client.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  ChatClient,
  type ReattachAttempt,
  type TurnEvent,
  TurnOutcome,
  type WatchSessionItem,
} from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { liveClient, SKIP_WITHOUT_SERVER, TARGET, TOKEN } from "../conformance/live.js";
import { CutProxy } from "./cut-proxy.js";

const skip = SKIP_WITHOUT_SERVER;
const HTTP_URL = process.env["AGENTSKIT_CHAT_CONFORMANCE_HTTP_URL"];
const CONNECT_TOKEN = process.env["AGENTSKIT_CHAT_CONFORMANCE_CONNECT_TOKEN"];
const GRPCWEB_TOKEN = process.env["AGENTSKIT_CHAT_CONFORMANCE_GRPCWEB_TOKEN"];
// Model replies of the corpus: reattach-after-cut.yaml (4 chunks, 400 ms before each) and
// cancel-turn.yaml (1.5 s before each chunk).
const SLOW = "conformance: an answer that outlives its stream";
const SLOW_TEXT = "Still here after the cut.";
const SLOWER = "conformance: an answer to cancel from elsewhere";

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const seen: T[] = [];
  for await (const item of items) seen.push(item);
  return seen;
}

/** Wait until `condition` holds, for at most 5 s. */
async function until(condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 20) {
    assert.ok(waited < 5_000, "the condition never held");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function text(events: readonly TurnEvent[]): string {
  return events.map((event) => (event.kind === "delta" ? event.value.text : "")).join("");
}

/** Run a continued turn through `proxy`, cutting every connection after its first event. */
async function cutTurn(client: ChatClient, proxy: CutProxy, turnId: string): Promise<void> {
  const session = await client.createSession("conformance");
  const attempts: ReattachAttempt[] = [];
  const events: TurnEvent[] = [];
  const seenAtAttempt: bigint[] = [];
  const onReattach = (attempt: ReattachAttempt): void => {
    attempts.push(attempt);
    seenAtAttempt.push(events.at(-1)?.sequence ?? 0n);
  };
  for await (const event of client.submit(session.sessionId, SLOW, {
    turnId,
    onDisconnect: "continue",
    reattach: { onReattach },
  })) {
    events.push(event);
    if (events.length === 1) proxy.cut();
  }
  assert.ok(attempts.length >= 1, "the stream was cut and followed again");
  // From the last event received (a second one may have been in the buffers at the cut).
  assert.deepEqual(
    attempts.map((attempt) => attempt.afterSequence),
    seenAtAttempt,
  );
  assert.ok(seenAtAttempt.every((sequence) => sequence < (events.at(-1)?.sequence ?? 0n)));
  assert.deepEqual(
    events.map((event) => event.sequence),
    events.map((_, index) => BigInt(index + 1)),
    "each event once, in order",
  );
  assert.equal(events[0]?.kind, "started");
  assert.equal(events.at(-1)?.kind, "completed");
  assert.equal(text(events), SLOW_TEXT);
  const record = await client.getTurn(session.sessionId, turnId);
  assert.equal(record.outcome, TurnOutcome.COMPLETED);
  const history = await client.getSession(session.sessionId);
  assert.deepEqual(
    history.messages.map((message) => message.content),
    [SLOW, SLOW_TEXT],
    "the turn committed once",
  );
}

test("a continued turn whose gRPC connection is cut reattaches and ends once", { skip }, async () => {
  const proxy = await CutProxy.start(TARGET ?? "");
  try {
    const client = new ChatClient(createNodeTransport(proxy.target), {
      token: TOKEN,
      timeoutMs: 20_000,
    });
    await cutTurn(client, proxy, "ts-cut-grpc");
    assert.ok(proxy.accepted >= 2, "the reattach came through a new connection");
  } finally {
    await proxy.close();
  }
});

test("a continued turn whose Connect connection is cut reattaches and ends once", { skip }, async () => {
  const proxy = await CutProxy.start(new URL(HTTP_URL ?? "http://127.0.0.1:1").host);
  try {
    const transport = createConnectTransport({
      baseUrl: proxy.url,
      httpVersion: "1.1",
      useBinaryFormat: false,
    });
    const client = new ChatClient(transport, { token: CONNECT_TOKEN, timeoutMs: 20_000 });
    await cutTurn(client, proxy, "ts-cut-connect");
  } finally {
    await proxy.close();
  }
});

test("a continued turn whose gRPC-Web connection is cut reattaches and ends once", { skip }, async () => {
  const proxy = await CutProxy.start(new URL(HTTP_URL ?? "http://127.0.0.1:1").host);
  try {
    const transport = createGrpcWebTransport({ baseUrl: proxy.url, httpVersion: "2" });
    const client = new ChatClient(transport, { token: GRPCWEB_TOKEN, timeoutMs: 20_000 });
    await cutTurn(client, proxy, "ts-cut-grpcweb");
  } finally {
    await proxy.close();
  }
});

test("watchTurn follows a turn by id, cancelTurn stops it, watchSession sees both", { skip }, async () => {
  const client = liveClient({ timeoutMs: 20_000 });
  const session = await client.createSession("conformance");
  const sessionId = session.sessionId;

  // A watch of the session, read until the turn "ts-after" ends.
  const watched: WatchSessionItem[] = [];
  let watching: () => void = () => {};
  const inPlace = new Promise<void>((resolve) => (watching = resolve));
  const watch = (async () => {
    for await (const item of client.watchSession(sessionId)) {
      watched.push(item);
      watching();
      if (item.kind === "event" && item.event.turnId === "ts-after" && item.event.kind === "completed") {
        break;
      }
    }
  })();
  await inPlace;

  // A running turn, cancelled by id from the same client while its starter reads it.
  const starter: TurnEvent[] = [];
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => (started = resolve));
  const stream = (async () => {
    for await (const event of client.submit(sessionId, SLOWER, { turnId: "ts-stop" })) {
      starter.push(event);
      started();
    }
  })();
  await running;
  await until(() => watched.some((item) => item.kind === "event" && item.event.turnId === "ts-stop"));
  assert.deepEqual(await client.cancelTurn(sessionId, "ts-stop"), { cancelled: true, turn: undefined });
  await stream;
  const failed = starter.at(-1);
  assert.ok(failed?.kind === "failed", `the stream ended with ${failed?.kind}`);
  assert.equal(failed.value.code, "cancelled");
  assert.equal(failed.value.retryable, true);
  const again = await client.cancelTurn(sessionId, "ts-stop");
  assert.equal(again.cancelled, false);

  // A finished continued turn, watched from the start and after its last event.
  const turn = await collect(
    client.submit(sessionId, "/start", { turnId: "ts-after", onDisconnect: "continue" }),
  );
  const last = turn.at(-1)?.sequence ?? 0n;
  const replay = await collect(client.watchTurn(sessionId, "ts-after"));
  assert.deepEqual(
    replay.map((event) => [event.sequence, event.kind]),
    turn.map((event) => [event.sequence, event.kind]),
  );
  assert.deepEqual(await collect(client.watchTurn(sessionId, "ts-after", { afterSequence: last })), []);
  const tail = await collect(client.watchTurn(sessionId, "ts-after", { afterSequence: 1 }));
  assert.equal(tail[0]?.sequence, 2n);

  await watch;
  assert.equal(watched[0]?.kind, "session");
  const turns = [
    ...new Set(watched.flatMap((item) => (item.kind === "event" ? [item.event.turnId] : []))),
  ];
  assert.deepEqual(turns, ["ts-stop", "ts-after"]);
  const stopped = watched.flatMap((item) =>
    item.kind === "event" && item.event.turnId === "ts-stop" ? [item.event] : [],
  );
  assert.equal(stopped.at(-1)?.kind, "failed", "the watcher saw the cancel too");
  const seen = watched.flatMap((item) =>
    item.kind === "event" && item.event.turnId === "ts-after" ? [item.event.sequence] : [],
  );
  assert.deepEqual(seen, turn.map((event) => event.sequence), "the watcher saw the same events");
});
