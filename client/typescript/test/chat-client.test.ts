// ChatClient against the live server: every RPC, the turn shortcuts, errors, cancellation.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ChatError,
  Code,
  HistoryMode,
  Role,
  TurnKind,
  TurnOutcome,
  commandHints,
  type TurnEvent,
} from "@agentskit/chat-client";
import { liveClient, SKIP_WITHOUT_SERVER } from "../conformance/live.js";

const skip = SKIP_WITHOUT_SERVER;

async function collect(events: AsyncIterable<TurnEvent>): Promise<TurnEvent[]> {
  const seen: TurnEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

async function rejection(promise: Promise<unknown>): Promise<ChatError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ChatError, `expected a ChatError, got ${String(error)}`);
    return error;
  }
  assert.fail("the call succeeded");
}

test("definitions are listed and described, with route hints", { skip }, async () => {
  const client = liveClient();
  const definitions = await client.listDefinitions();
  assert.ok(definitions.some((definition) => definition.id === "support"));
  const support = await client.getDefinition("support");
  assert.equal(typeof support.revision, "bigint");
  assert.deepEqual(commandHints(support.routes, { state: "idle", allowedEvents: ["start"] }), [
    "/start",
  ]);
  const missing = await rejection(client.getDefinition("no-such-definition"));
  assert.equal(missing.codeName, "NOT_FOUND");
  assert.equal(missing.reason, "ERROR_REASON_DEFINITION_NOT_FOUND");
});

test(
  "a session runs a streamed turn, keeps its history and records the turn",
  { skip },
  async () => {
    const client = liveClient();
    const session = await client.createSession("support");
    assert.equal(session.cursor, 0n);
    assert.equal(session.historyMode, HistoryMode.SERVER);
    const events = await collect(
      client.submit(session.sessionId, "/start", { turnId: "ts-start-1" }),
    );
    assert.deepEqual(
      [...new Set(events.map((event) => event.kind))],
      ["started", "decision", "delta", "completed"],
    );
    assert.ok(
      events.every(
        (event) => event.turnId === "ts-start-1" && event.sessionId === session.sessionId,
      ),
    );
    assert.deepEqual(
      events.map((event) => event.sequence),
      events.map((_, i) => BigInt(i + 1)),
    );
    const decision = events.find((event) => event.kind === "decision");
    assert.equal(decision?.kind === "decision" && decision.value.kind, TurnKind.DETERMINISTIC);
    const completed = events.at(-1);
    assert.ok(completed?.kind === "completed");
    assert.equal(completed.value.content, "What is your name?");
    assert.equal(completed.value.snapshot?.state, "collecting");

    const history = await client.getSession(session.sessionId);
    assert.equal(history.session.cursor, completed.value.cursor);
    assert.deepEqual(
      history.messages.map((m) => [m.role, m.content]),
      [
        [Role.USER, "/start"],
        [Role.ASSISTANT, "What is your name?"],
      ],
    );
    const record = await client.getTurn(session.sessionId, "ts-start-1");
    assert.equal(record.outcome, TurnOutcome.COMPLETED);
    assert.equal(record.routeId, "start");
    const page = await client.listTurns(session.sessionId, { pageSize: 1 });
    assert.deepEqual(
      page.turns.map((turn) => turn.turnId),
      ["ts-start-1"],
    );
    assert.equal(page.nextPageToken, undefined);
    const all = [];
    for await (const turn of client.allTurns(session.sessionId)) all.push(turn.turnId);
    assert.deepEqual(all, ["ts-start-1"]);

    const result = await client.runTurn({
      sessionId: session.sessionId,
      operation: { case: "submit", value: { content: "/name Ada" } },
    });
    assert.equal(result.text, "Welcome, Ada.");
    assert.equal(result.completed?.snapshot?.state, "complete");
    assert.match(result.turnId, /^[0-9a-f]{32}$/);
  },
);

test("a repeated turn id replays its outcome instead of running again", { skip }, async () => {
  const client = liveClient();
  const { sessionId } = await client.createSession("support");
  await collect(client.submit(sessionId, "/start", { turnId: "ts-once" }));
  const again = await client.runTurn({
    sessionId,
    turnId: "ts-once",
    operation: { case: "submit", value: { content: "/start" } },
  });
  assert.equal(again.started?.duplicate, true);
  assert.equal((await client.getSession(sessionId)).messages.length, 2);
});

test("retry, regenerate, edit and truncate reshape a server-held history", { skip }, async () => {
  const client = liveClient();
  const { sessionId } = await client.createSession("support");
  const first = await client.runTurn({
    sessionId,
    operation: { case: "submit", value: { content: "/start", messageId: "u1" } },
  });
  assert.equal(first.started?.userMessageId, "u1");
  const retried = await collect(client.retry(sessionId));
  assert.ok(retried.some((event) => event.kind === "decision" && event.value.replayed));
  const regenerated = await collect(client.regenerate(sessionId));
  assert.equal(regenerated.at(-1)?.kind, "completed");
  const edited = await collect(
    client.edit(sessionId, "u1", "/start", {
      expectedCursor: (await client.getSession(sessionId)).session.cursor,
    }),
  );
  assert.equal(edited.at(-1)?.kind, "completed");
  const truncated = await client.truncate(sessionId, "u1");
  assert.deepEqual(
    truncated.messages.map((m) => m.id),
    ["u1"],
  );
  const emptied = await client.truncateHistory({ sessionId });
  assert.deepEqual(emptied.messages, []);
});

test("a client-held history is dispatched whole", { skip }, async () => {
  const client = liveClient();
  const session = await client.createSession("support", { historyMode: "client" });
  assert.equal(session.historyMode, HistoryMode.CLIENT);
  const result = await client.runTurn({
    sessionId: session.sessionId,
    operation: {
      case: "dispatch",
      value: { messages: [{ id: "c1", role: "user", content: "/start" }] },
    },
  });
  assert.equal(result.decision?.routeId, "start");
  const events = await collect(
    client.dispatch(session.sessionId, [
      { id: "c1", role: "user", content: "/start" },
      { id: "c2", role: "assistant", content: result.text },
      { id: "c3", role: Role.USER, content: "/name Grace" },
    ]),
  );
  assert.ok(
    events.some((event) => event.kind === "completed" && event.value.content === "Welcome, Grace."),
  );
});

test(
  "a stale expected cursor is a CONFLICT naming the current cursor, and changes nothing",
  { skip },
  async () => {
    const client = liveClient();
    const { sessionId } = await client.createSession("support");
    const conflict = await rejection(
      collect(client.submit(sessionId, "/start", { expectedCursor: 7n })),
    );
    assert.equal(conflict.code, Code.Aborted);
    assert.equal(conflict.reason, "ERROR_REASON_CONFLICT");
    assert.equal(conflict.metadata["cursor"], "0");
    const refused = await rejection(client.deleteSession(sessionId, { expectedCursor: 3 }));
    assert.equal(refused.reason, "ERROR_REASON_CONFLICT");
    assert.equal((await client.getSession(sessionId)).session.cursor, 0n);
    await client.deleteSession(sessionId, { expectedCursor: 0 });
    const gone = await rejection(client.getSession(sessionId));
    assert.equal(gone.reason, "ERROR_REASON_SESSION_NOT_FOUND");
  },
);

test("the bearer token is sent, and a wrong one is UNAUTHENTICATED", { skip }, async () => {
  const wrong = await rejection(liveClient({ token: "not-a-token" }).listDefinitions());
  assert.equal(wrong.codeName, "UNAUTHENTICATED");
  assert.equal(wrong.reason, "ERROR_REASON_UNAUTHENTICATED");
  const none = await rejection(liveClient({ token: undefined }).createSession("support"));
  assert.equal(none.code, Code.Unauthenticated);
  const empty = await rejection(liveClient({ token: "" }).createSession("support"));
  assert.equal(empty.reason, "ERROR_REASON_UNAUTHENTICATED", "an empty token sends none");
});

test("a turn stream that fails before any event names its turn id", { skip }, async () => {
  const client = liveClient();
  const generated = await rejection(collect(client.submit("no-such-session", "hello")));
  assert.equal(generated.codeName, "NOT_FOUND");
  assert.match(generated.turnId ?? "", /^[0-9a-f]{32}$/, "the generated turn id");
  const given = await rejection(
    client.runTurn({
      sessionId: "no-such-session",
      turnId: "mine-1",
      operation: { case: "retry", value: { messageId: "" } },
    }),
  );
  assert.equal(given.turnId, "mine-1");
  const unary = await rejection(client.getSession("no-such-session"));
  assert.equal(unary.turnId, undefined, "only turn streams carry a turn id");
});

test("an aborted signal cancels a call before it starts, as CANCELLED", { skip }, async () => {
  const client = liveClient();
  const { sessionId } = await client.createSession("support");
  const cancelled = await rejection(
    collect(client.submit(sessionId, "/start", { signal: AbortSignal.abort() })),
  );
  assert.equal(cancelled.codeName, "CANCELLED");
  const unary = await rejection(
    client.getSession(sessionId, { signal: AbortSignal.abort(new Error("unmounted")) }),
  );
  assert.equal(unary.code, Code.Canceled, "whatever reason the caller gives");
  assert.equal((await client.getSession(sessionId)).messages.length, 0, "nothing ran");
});

test("leaving a stream early ends the call and frees the session", { skip }, async () => {
  const client = liveClient();
  const { sessionId } = await client.createSession("support");
  for await (const event of client.submit(sessionId, "/start")) {
    assert.equal(event.kind, "started");
    break;
  }
  // The lease is released (committed or cancelled): a next turn is not SESSION_BUSY for long.
  let outcome = "";
  for (let attempt = 0; attempt < 50 && outcome === ""; attempt++) {
    try {
      await collect(client.submit(sessionId, "/start"));
      outcome = "ran";
    } catch (error) {
      assert.ok(
        error instanceof ChatError && error.reason === "ERROR_REASON_SESSION_BUSY",
        String(error),
      );
      await new Promise((resolve) => setTimeout(resolve, error.retryAfterMs ?? 100));
    }
  }
  assert.equal(outcome, "ran");
});

test("a deadline too short for the call is DEADLINE_EXCEEDED", { skip }, async () => {
  const client = liveClient({ timeoutMs: 1 });
  const late = await rejection(client.listDefinitions());
  assert.equal(late.codeName, "DEADLINE_EXCEEDED");
  const patient = await client.listDefinitions({ timeoutMs: 0 });
  assert.ok(patient.length > 0, "timeoutMs <= 0 on the call disables the client default");
});

test("calls below the stream limit of one connection never fail", { skip }, async () => {
  const client = liveClient(); // one transport: one HTTP/2 connection
  await client.listDefinitions(); // the connection is open
  const calls = 2000;
  const concurrency = 90; // the server allows 100 calls per connection by default
  let started = 0;
  const failed: Record<string, number> = {};
  const worker = async (): Promise<void> => {
    while (started++ < calls) {
      try {
        await client.listDefinitions();
      } catch (error) {
        const name = error instanceof ChatError ? error.codeName : String(error);
        failed[name] = (failed[name] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  assert.deepEqual(failed, {});
});
