// Automatic reattach, against a scripted server behind a TCP proxy the test cuts mid-turn:
// over gRPC, Connect (HTTP/1.1) and gRPC-Web (HTTP/2).
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  ChatClient,
  ChatError,
  DisconnectMode,
  type ReattachAttempt,
  type TurnEvent,
} from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { CutProxy } from "./cut-proxy.js";
import { BEFORE_CUT, ScriptedServer, TEXT } from "./scripted-server.js";

type Protocol = "grpc" | "connect" | "grpcweb";
const PROTOCOLS: readonly Protocol[] = ["grpc", "connect", "grpcweb"];
const FAST = { initialDelayMs: 5, maxDelayMs: 20 };

interface Rig {
  readonly server: ScriptedServer;
  readonly proxy: CutProxy;
  readonly client: ChatClient;
  close(): Promise<void>;
}

async function rig(protocol: Protocol): Promise<Rig> {
  const server = new ScriptedServer();
  await server.start();
  const proxy = await CutProxy.start(
    protocol === "connect" ? server.http1Target : server.http2Target,
  );
  const transports: Record<Protocol, () => Transport> = {
    grpc: () => createNodeTransport(proxy.target),
    connect: () =>
      createConnectTransport({ baseUrl: proxy.url, httpVersion: "1.1", useBinaryFormat: false }),
    grpcweb: () => createGrpcWebTransport({ baseUrl: proxy.url, httpVersion: "2" }),
  };
  const client = new ChatClient(transports[protocol](), { timeoutMs: 10_000 });
  return {
    server,
    proxy,
    client,
    async close() {
      await proxy.close();
      await server.close();
    },
  };
}

/** Read `events`, cutting the proxy once the first stream sent all it sends before the cut. */
async function readCutting(proxy: CutProxy, events: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const seen: TurnEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    if (seen.length === BEFORE_CUT) {
      proxy.cut();
    }
  }
  return seen;
}

async function failure(read: Promise<unknown>): Promise<ChatError> {
  try {
    await read;
  } catch (error) {
    assert.ok(error instanceof ChatError, `expected a ChatError, got ${String(error)}`);
    return error;
  }
  assert.fail("the stream did not fail");
}

test("a continued turn cut mid-answer goes on from its last event, each event once", async () => {
  for (const protocol of PROTOCOLS) {
    const { server, proxy, client, close } = await rig(protocol);
    try {
      const attempts: ReattachAttempt[] = [];
      const events = await readCutting(
        proxy,
        client.submit("s1", "hello", {
          turnId: "t1",
          onDisconnect: "continue",
          reattach: { ...FAST, onReattach: (attempt) => attempts.push(attempt) },
        }),
      );
      assert.deepEqual(
        events.map((event) => event.sequence),
        [1n, 2n, 3n, 4n, 5n, 6n],
        protocol,
      );
      assert.deepEqual(
        events.map((event) => event.kind),
        ["started", "decision", "delta", "delta", "delta", "completed"],
      );
      const text = events.map((event) => (event.kind === "delta" ? event.value.text : "")).join("");
      assert.equal(text, TEXT.join(""));
      assert.deepEqual(server.calls, [
        { method: "streamTurn", turnId: "t1", onDisconnect: DisconnectMode.CONTINUE },
        { method: "watchTurn", turnId: "t1", afterSequence: 3n },
      ]);
      assert.equal(attempts.length, 1, protocol);
      assert.equal(attempts[0]?.afterSequence, 3n);
      assert.ok(attempts[0]?.error instanceof ChatError);
      assert.ok(proxy.accepted >= 2, "the reattach came through a new connection");
    } finally {
      await close();
    }
  }
});

test("a recorded outcome that breaks is followed again from its start, never mixed", async () => {
  for (const protocol of PROTOCOLS) {
    const { server, proxy, client, close } = await rig(protocol);
    try {
      server.watchAnswers = ["outcome-cut", "outcome"]; // the events are no longer kept
      const events = await readCutting(
        proxy,
        client.submit("s1", "hello", { turnId: "t1", onDisconnect: "continue", reattach: FAST }),
      );
      assert.deepEqual(
        events.map((event) => event.sequence),
        [1n, 2n, 3n, 4n, 5n, 6n],
        protocol,
      );
      assert.deepEqual(
        events.map((event) => event.kind),
        ["started", "decision", "delta", "started", "delta", "completed"],
        protocol,
      );
      const repeats = events.filter((event) => event.kind === "started" && event.value.duplicate);
      assert.equal(repeats.length, 1, protocol);
      assert.deepEqual(
        server.calls.slice(1).map((call) => call.afterSequence),
        [3n, 0n],
        `${protocol}: its own numbering, followed again from the start`,
      );
    } finally {
      await close();
    }
  }
});

test("a watched turn cut mid-answer is watched again from its last event", async () => {
  for (const protocol of PROTOCOLS) {
    const { server, proxy, client, close } = await rig(protocol);
    try {
      server.watchAnswers = ["hold", "events"];
      const seen: bigint[] = [];
      for await (const event of client.watchTurn("s1", "t2", { afterSequence: 1, reattach: FAST })) {
        seen.push(event.sequence);
        if (seen.length === 1) proxy.cut(); // the first watch is cut after its first event
      }
      assert.deepEqual(seen, [2n, 3n, 4n, 5n, 6n], protocol);
      assert.equal(server.calls[0]?.afterSequence, 1n);
      assert.equal(server.calls.at(-1)?.afterSequence, 2n, protocol);
    } finally {
      await close();
    }
  }
});

test("a turn that cancels on disconnect is never reattached", async () => {
  for (const protocol of PROTOCOLS) {
    const { server, proxy, client, close } = await rig(protocol);
    try {
      const error = await failure(
        readCutting(proxy, client.submit("s1", "hello", { turnId: "t3", reattach: FAST })),
      );
      assert.equal(error.turnId, "t3");
      assert.ok(
        ["UNAVAILABLE", "INTERNAL", "ABORTED", "CANCELLED"].includes(error.codeName),
        error.message,
      );
      assert.deepEqual(
        server.calls.map((call) => call.method),
        ["streamTurn"],
        protocol,
      );
      assert.equal(server.calls[0]?.onDisconnect, DisconnectMode.UNSPECIFIED);
    } finally {
      await close();
    }
  }
});

test("reattaching gives up after maxAttempts with the last error", async () => {
  const { server, proxy, client, close } = await rig("grpc");
  try {
    server.watchAnswers = ["unavailable"];
    const attempts: ReattachAttempt[] = [];
    const error = await failure(
      readCutting(
        proxy,
        client.submit("s1", "hello", {
          turnId: "t4",
          onDisconnect: "continue",
          reattach: { maxAttempts: 3, initialDelayMs: 5, onReattach: (a) => attempts.push(a) },
        }),
      ),
    );
    assert.equal(error.codeName, "UNAVAILABLE");
    assert.equal(error.rawMessage, "no connection to the turn");
    assert.equal(error.turnId, "t4");
    assert.deepEqual(
      attempts.map((attempt) => [attempt.attempt, attempt.delayMs, attempt.afterSequence]),
      [
        [1, 5, 3n],
        [2, 10, 3n],
        [3, 20, 3n],
      ],
    );
    assert.equal(server.calls.filter((call) => call.method === "watchTurn").length, 3);
  } finally {
    await close();
  }
});

test("the default backoff doubles from 100 ms to 2 s over 8 attempts", async () => {
  const { server, proxy, client, close } = await rig("grpc");
  try {
    server.watchAnswers = ["unavailable"];
    const delays: number[] = [];
    const abort = new AbortController();
    const error = await failure(
      readCutting(
        proxy,
        client.submit("s1", "hello", {
          turnId: "t5",
          onDisconnect: "continue",
          signal: abort.signal,
          // Record the delays the default policy chooses, then stop before waiting them out.
          reattach: {
            onReattach: (attempt) => {
              delays.push(attempt.delayMs);
              abort.abort();
            },
          },
        }),
      ),
    );
    assert.equal(error.codeName, "CANCELLED");
    assert.deepEqual(delays, [100]);
    assert.deepEqual(
      server.calls.map((call) => call.method),
      ["streamTurn"],
      "no attempt after the caller aborted",
    );
  } finally {
    await close();
  }
  const { backoffMs, reattachPolicy } = await import("../src/reattach.js");
  const policy = reattachPolicy(undefined, undefined);
  assert.ok(policy !== undefined);
  assert.equal(policy.maxAttempts, 8);
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => backoffMs(policy, attempt)),
    [100, 200, 400, 800, 1600, 2000, 2000, 2000],
  );
  assert.equal(reattachPolicy(false, undefined), undefined);
  assert.equal(reattachPolicy({ maxAttempts: 0 }, undefined), undefined);
  assert.equal(reattachPolicy(undefined, false), undefined);
  assert.throws(() => new ChatClient(createNodeTransport("127.0.0.1:1"), { reattach: { maxAttempts: -1 } }), RangeError);
});

test("a turn that never started is not watched into existence: the first error stays", async () => {
  const { server, client, close } = await rig("grpc");
  try {
    server.refuseTurns = true;
    server.watchAnswers = ["not-found"];
    const error = await failure(
      (async () => {
        for await (const _ of client.submit("s1", "hello", {
          turnId: "t6",
          onDisconnect: "continue",
          reattach: FAST,
        })) {
          assert.fail("no event was expected");
        }
      })(),
    );
    assert.equal(error.codeName, "UNAVAILABLE");
    assert.equal(error.rawMessage, "the server is draining");
    assert.equal(error.turnId, "t6");
    assert.deepEqual(
      server.calls.map((call) => [call.method, call.afterSequence]),
      [
        ["streamTurn", undefined],
        ["watchTurn", 0n],
      ],
    );
  } finally {
    await close();
  }
});
