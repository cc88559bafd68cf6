// The events of a turn stream, as a union narrowed by `kind`.
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type {
  PendingToolCall,
  Session,
  StreamTurnResponse,
  TextDelta,
  ToolCall,
  ToolCallDelta,
  ToolCallEnded,
  ToolCallResult,
  ToolCallStarted,
  TurnCompleted,
  TurnDecision,
  TurnFailed,
  TurnStarted,
  WatchSessionResponse,
} from "./gen/agentskit/chat/v1/chat_pb.js";

/** What every event of a turn carries besides its kind and value. */
export interface TurnEventEnvelope {
  /** The session the turn runs in. */
  readonly sessionId: string;
  /** The turn id of the request (the one the client generated when none was given). */
  readonly turnId: string;
  /** Starts at 1 and increases by one with every event (uint64, hence `bigint`). */
  readonly sequence: bigint;
  /** When the server produced the event. */
  readonly time: Timestamp | undefined;
}

/**
 * One event of a turn. Events arrive in order: `started`, `decision`, any `delta`s and
 * tool call events, then exactly one of `completed` or `failed`. Each tool call the model
 * makes is a `toolCallStarted` (its id and name), `toolCallDelta`s (pieces of its
 * arguments, JSON text) and a `toolCallEnded` (the whole arguments, and what the call
 * waits for); a server tool's call (wait `TOOL_WAIT_SERVER`) is then run by the
 * service, and its `toolCallResult` follows. The calls of one answer may interleave with
 * each other and with `delta`s, and a call's events keep their order. Switch on `kind` to
 * narrow `value`.
 */
export type TurnEvent = TurnEventEnvelope &
  (
    | { readonly kind: "started"; readonly value: TurnStarted }
    | { readonly kind: "decision"; readonly value: TurnDecision }
    | { readonly kind: "delta"; readonly value: TextDelta }
    | { readonly kind: "toolCallStarted"; readonly value: ToolCallStarted }
    | { readonly kind: "toolCallDelta"; readonly value: ToolCallDelta }
    | { readonly kind: "toolCallEnded"; readonly value: ToolCallEnded }
    | { readonly kind: "toolCallResult"; readonly value: ToolCallResult }
    | { readonly kind: "completed"; readonly value: TurnCompleted }
    | { readonly kind: "failed"; readonly value: TurnFailed }
  );

/** The kinds of {@link TurnEvent}. */
export type TurnEventKind = TurnEvent["kind"];

/** A whole turn collected by `runTurn`. */
export interface TurnResult {
  /** The turn id the request carried. */
  readonly turnId: string;
  readonly started: TurnStarted | undefined;
  readonly decision: TurnDecision | undefined;
  /** The deltas joined. Discard it when `failed` is set: it was not committed. */
  readonly text: string;
  readonly completed: TurnCompleted | undefined;
  /** Set when the turn ran but committed nothing (a route or the model failed). */
  readonly failed: TurnFailed | undefined;
  /** The tools the answer called, in order: the completed event's, or empty. */
  readonly toolCalls: readonly ToolCall[];
  /**
   * The calls the answer waits on: the completed event's, or empty. The session's next
   * turn must answer each, with `toolResults` (or a `dispatch` whose history ends with
   * their results), a result for a call waiting for one (`ToolWait.RESULT`) and a
   * decision for a call waiting for approval (`ToolWait.APPROVAL`).
   */
  readonly pendingToolCalls: readonly PendingToolCall[];
  /** Every event, in order. */
  readonly events: readonly TurnEvent[];
}

/** The event of a response, or undefined for an event kind this client does not know. */
export function eventFromResponse(response: StreamTurnResponse): TurnEvent | undefined {
  const envelope: TurnEventEnvelope = {
    sessionId: response.sessionId,
    turnId: response.turnId,
    sequence: response.sequence,
    time: response.time,
  };
  const event = response.event;
  switch (event.case) {
    case "started":
      return { ...envelope, kind: "started", value: event.value };
    case "decision":
      return { ...envelope, kind: "decision", value: event.value };
    case "delta":
      return { ...envelope, kind: "delta", value: event.value };
    case "toolCallStarted":
      return { ...envelope, kind: "toolCallStarted", value: event.value };
    case "toolCallDelta":
      return { ...envelope, kind: "toolCallDelta", value: event.value };
    case "toolCallEnded":
      return { ...envelope, kind: "toolCallEnded", value: event.value };
    case "toolCallResult":
      return { ...envelope, kind: "toolCallResult", value: event.value };
    case "completed":
      return { ...envelope, kind: "completed", value: event.value };
    case "failed":
      return { ...envelope, kind: "failed", value: event.value };
    default:
      return undefined;
  }
}

/** Collect the events of one turn into a {@link TurnResult}. */
export async function collectTurn(
  turnId: string,
  events: AsyncIterable<TurnEvent>,
): Promise<TurnResult> {
  let started: TurnStarted | undefined;
  let decision: TurnDecision | undefined;
  let completed: TurnCompleted | undefined;
  let failed: TurnFailed | undefined;
  const text: string[] = [];
  const seen: TurnEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    switch (event.kind) {
      case "started":
        started = event.value;
        break;
      case "decision":
        decision = event.value;
        break;
      case "delta":
        text.push(event.value.text);
        break;
      case "completed":
        completed = event.value;
        break;
      case "failed":
        failed = event.value;
        break;
    }
  }
  return {
    turnId,
    started,
    decision,
    text: text.join(""),
    completed,
    failed,
    toolCalls: completed?.toolCalls ?? [],
    pendingToolCalls: completed?.pendingToolCalls ?? [],
    events: seen,
  };
}

/** Whether an event ends its turn: `completed` or `failed`. */
export function isTerminal(event: TurnEvent): boolean {
  return event.kind === "completed" || event.kind === "failed";
}

/**
 * One item of a session watch (`ChatClient.watchSession`), narrowed by `kind`: the session
 * (first, then after every stored change), an event of one of its turns (each tagged with
 * its `turnId`), or a heartbeat sent after a silence.
 */
export type WatchSessionItem =
  | { readonly kind: "session"; readonly session: Session }
  | { readonly kind: "event"; readonly event: TurnEvent }
  | { readonly kind: "heartbeat"; readonly time: Timestamp | undefined };

/** The item of a watch response, or undefined for an item or event this client does not know. */
export function itemFromResponse(response: WatchSessionResponse): WatchSessionItem | undefined {
  const item = response.item;
  switch (item.case) {
    case "session":
      return { kind: "session", session: item.value };
    case "event": {
      const event = eventFromResponse(item.value);
      return event === undefined ? undefined : { kind: "event", event };
    }
    case "heartbeat":
      return { kind: "heartbeat", time: item.value.time };
    default:
      return undefined;
  }
}
