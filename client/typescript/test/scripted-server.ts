// A scripted chat server for the client's reattach rules: one turn of six events whose
// first stream stops after the third until the connection is cut, and a WatchTurn that
// answers as a test tells it. It answers gRPC and gRPC-Web on HTTP/2, Connect on HTTP/1.1.
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createHttp2Server, type Http2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ChatService,
  DisconnectMode,
  type StreamTurnResponse,
  StreamTurnResponseSchema,
  TextDeltaSchema,
  TurnCompletedSchema,
  TurnDecisionSchema,
  TurnStartedSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";

/** A call the server received. */
export interface Call {
  readonly method: "streamTurn" | "watchTurn";
  readonly turnId: string;
  readonly onDisconnect?: DisconnectMode;
  readonly afterSequence?: bigint;
}

/**
 * How WatchTurn answers: the events after the sequence; the first of them, then nothing
 * until the connection is cut ("hold"); an error; or the recorded outcome, as a server
 * that no longer keeps the events answers, numbered from the sequence + 1, whole
 * ("outcome") or cut after two of its events ("outcome-cut").
 */
export type WatchAnswer =
  | "events"
  | "hold"
  | "unavailable"
  | "not-found"
  | "outcome"
  | "outcome-cut";

export const TEXT = ["Hel", "lo ", "there."];
/** The events the first stream sends before it waits for the cut. */
export const BEFORE_CUT = 3;

export class ScriptedServer {
  readonly calls: Call[] = [];
  /** WatchTurn's answers in order; the last one repeats. */
  watchAnswers: WatchAnswer[] = ["events"];
  /** StreamTurn fails with UNAVAILABLE before any event when set. */
  refuseTurns = false;
  readonly #h2: Http2Server;
  readonly #h1: HttpServer;

  constructor() {
    const handler = connectNodeAdapter({
      routes: (router: ConnectRouter) =>
        router.service(ChatService, {
          streamTurn: (request, context) =>
            this.#streamTurn(request.sessionId, request.turnId, request.onDisconnect, context),
          watchTurn: (request, context) =>
            this.#watchTurn(request.sessionId, request.turnId, request.afterSequence, context),
        }),
    });
    this.#h2 = createHttp2Server(handler);
    this.#h1 = createHttpServer(handler);
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#h2.listen(0, "127.0.0.1", resolve));
    await new Promise<void>((resolve) => this.#h1.listen(0, "127.0.0.1", resolve));
  }

  /** `host:port` of the HTTP/2 listener (gRPC, gRPC-Web). */
  get http2Target(): string {
    return `127.0.0.1:${(this.#h2.address() as AddressInfo).port}`;
  }

  /** `host:port` of the HTTP/1.1 listener (Connect). */
  get http1Target(): string {
    return `127.0.0.1:${(this.#h1.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.#h1.closeAllConnections();
    await Promise.all([
      new Promise((resolve) => this.#h2.close(resolve)),
      new Promise((resolve) => this.#h1.close(resolve)),
    ]);
  }

  async *#streamTurn(
    sessionId: string,
    turnId: string,
    onDisconnect: DisconnectMode,
    context: HandlerContext,
  ): AsyncGenerator<StreamTurnResponse> {
    this.calls.push({ method: "streamTurn", turnId, onDisconnect });
    if (this.refuseTurns) {
      throw new ConnectError("the server is draining", Code.Unavailable);
    }
    yield* turnEvents(sessionId, turnId).slice(0, BEFORE_CUT);
    // The turn goes on without this stream: the rest is for WatchTurn.
    await new Promise((resolve) => context.signal.addEventListener("abort", resolve));
  }

  async *#watchTurn(
    sessionId: string,
    turnId: string,
    afterSequence: bigint,
    context: HandlerContext,
  ): AsyncGenerator<StreamTurnResponse> {
    this.calls.push({ method: "watchTurn", turnId, afterSequence });
    const answer =
      this.watchAnswers.length > 1 ? this.watchAnswers.shift() : this.watchAnswers[0];
    if (answer === "unavailable") {
      throw new ConnectError("no connection to the turn", Code.Unavailable);
    }
    if (answer === "not-found") {
      const info = create(ErrorInfoSchema, {
        reason: "ERROR_REASON_TURN_NOT_FOUND",
        domain: "chat.agentskit.dev",
      });
      throw new ConnectError("no such turn", Code.NotFound, undefined, [
        { desc: ErrorInfoSchema, value: info },
      ]);
    }
    if (answer === "outcome" || answer === "outcome-cut") {
      const outcome = recordedOutcome(sessionId, turnId, afterSequence);
      yield* answer === "outcome" ? outcome : outcome.slice(0, 2);
      if (answer === "outcome-cut") {
        throw new ConnectError("connection cut", Code.Unavailable);
      }
      return;
    }
    const events = turnEvents(sessionId, turnId).filter((event) => event.sequence > afterSequence);
    if (answer === "hold") {
      yield* events.slice(0, 1);
      await new Promise((resolve) => context.signal.addEventListener("abort", resolve));
      return;
    }
    yield* events;
  }
}

/** The turn's six events: started, decision, three deltas, completed. */
export function turnEvents(sessionId: string, turnId: string): StreamTurnResponse[] {
  const events: StreamTurnResponse["event"][] = [
    { case: "started", value: create(TurnStartedSchema, { userMessageId: "u1" }) },
    { case: "decision", value: create(TurnDecisionSchema) },
    ...TEXT.map((text) => ({ case: "delta" as const, value: create(TextDeltaSchema, { text }) })),
    { case: "completed", value: create(TurnCompletedSchema, { content: TEXT.join("") }) },
  ];
  return events.map((event, index) =>
    create(StreamTurnResponseSchema, {
      sessionId,
      turnId,
      sequence: BigInt(index + 1),
      event,
    }),
  );
}

/** A finished turn's recorded outcome (a repeat), numbered from `afterSequence` + 1. */
export function recordedOutcome(
  sessionId: string,
  turnId: string,
  afterSequence: bigint,
): StreamTurnResponse[] {
  const events: StreamTurnResponse["event"][] = [
    { case: "started", value: create(TurnStartedSchema, { userMessageId: "u1", duplicate: true }) },
    { case: "delta", value: create(TextDeltaSchema, { text: TEXT.join("") }) },
    { case: "completed", value: create(TurnCompletedSchema, { content: TEXT.join("") }) },
  ];
  return events.map((event, index) =>
    create(StreamTurnResponseSchema, {
      sessionId,
      turnId,
      sequence: afterSequence + BigInt(index + 1),
      event,
    }),
  );
}
