// What the runner observes of streams: a turn's events, a session watch's items, errors.
import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import { ChatError, type TurnEvent, type WatchSessionItem } from "@agentskit/chat-client";
import {
  SessionSchema,
  ToolCallEndedSchema,
  TurnCompletedSchema,
  TurnDecisionSchema,
  TurnFailedSchema,
  TurnStartedSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import type { Json } from "./matching.js";

export type Observation = { [key: string]: Json };

/** A stream the runner reads: its observation so far, and whether the step may move on. */
export interface StreamObserver<Item> {
  /** Take one item; true once the stream has nothing more the step waits for. */
  add(item: Item): boolean;
  /** True once a background step may move on (it holds what it waits for). */
  readonly ready: boolean;
  error: Observation | undefined;
  readonly observation: Observation;
}

export function json<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
): Observation {
  return toJson(schema, message) as Observation;
}

/** The error observation: status code name, ErrorInfo reason and metadata, retry delay. */
export function errorObservation(error: unknown): Observation {
  const chat = ChatError.from(error);
  const observed: Observation = { code: chat.codeName };
  if (chat.reason !== undefined) observed["reason"] = chat.reason;
  if (Object.keys(chat.metadata).length > 0) observed["metadata"] = { ...chat.metadata };
  if (chat.retryDelayMs !== undefined) observed["retryDelayMs"] = chat.retryDelayMs;
  return observed;
}

/** The corpus's name of each event kind. */
const KIND_NAMES: Readonly<Record<TurnEvent["kind"], string>> = {
  started: "started",
  decision: "decision",
  delta: "delta",
  toolCallStarted: "tool_call_started",
  toolCallDelta: "tool_call_delta",
  toolCallEnded: "tool_call_ended",
  toolCallResult: "tool_call_result",
  completed: "completed",
  failed: "failed",
};

/** One item of `toolCalls`: a started call, its argument pieces joined, its ended event. */
interface ToolCallObservation {
  toolCallId: string;
  name: string;
  arguments: string;
  ended?: Observation;
}

/**
 * A turn stream's observation, built as its events arrive: kinds, sequences, the last
 * sequence, text, the JSON of each single event and the tool calls; with `afterSequence`
 * (a `watch_turn`) also `gapless`.
 */
export class TurnObservation implements StreamObserver<TurnEvent> {
  readonly kinds: string[] = [];
  readonly sequences: number[] = [];
  readonly parts: Observation = {};
  readonly toolCalls: ToolCallObservation[] = [];
  text = "";
  terminal = false;
  error: Observation | undefined;

  constructor(readonly afterSequence?: bigint) {}

  get ready(): boolean {
    return this.kinds.length > 0;
  }

  add(event: TurnEvent): boolean {
    this.kinds.push(KIND_NAMES[event.kind]);
    this.sequences.push(Number(event.sequence));
    switch (event.kind) {
      case "started":
        this.parts["started"] = json(TurnStartedSchema, event.value);
        break;
      case "decision":
        this.parts["decision"] = json(TurnDecisionSchema, event.value);
        break;
      case "delta":
        this.text += event.value.text;
        break;
      case "toolCallStarted":
        this.toolCalls.push({
          toolCallId: event.value.toolCallId,
          name: event.value.name,
          arguments: "",
        });
        break;
      case "toolCallDelta": {
        const call = this.#toolCall(event.value.toolCallId);
        if (call !== undefined) call.arguments += event.value.argumentsDelta;
        break;
      }
      case "toolCallEnded": {
        const call = this.#toolCall(event.value.toolCallId);
        if (call !== undefined) call.ended = json(ToolCallEndedSchema, event.value);
        break;
      }
      case "completed":
        this.parts["completed"] = json(TurnCompletedSchema, event.value);
        this.terminal = true;
        break;
      case "failed":
        this.parts["failed"] = json(TurnFailedSchema, event.value);
        this.terminal = true;
        break;
    }
    return false; // a turn stream is read to its end
  }

  /**
   * The item of a started call; undefined for a call whose start this stream did not see
   * (a watch from after it): `toolCalls` has one item per `tool_call_started` event.
   */
  #toolCall(toolCallId: string): ToolCallObservation | undefined {
    return this.toolCalls.find((call) => call.toolCallId === toolCallId);
  }

  /** Consecutive sequences from afterSequence + 1, the last event terminal. */
  get gapless(): boolean {
    const first = Number(this.afterSequence ?? 0n) + 1;
    const consecutive = this.sequences.every((sequence, index) => sequence === first + index);
    const last = this.kinds.at(-1);
    return consecutive && (last === "completed" || last === "failed");
  }

  get observation(): Observation {
    const observed: Observation = {
      events: [...this.kinds],
      sequences: [...this.sequences],
      ...this.parts,
      text: this.text,
    };
    if (this.toolCalls.length > 0) {
      observed["toolCalls"] = this.toolCalls.map((call) => ({ ...call }));
    }
    const last = this.sequences.at(-1);
    if (last !== undefined) {
      observed["lastSequence"] = last;
    }
    if (this.afterSequence !== undefined) {
      observed["gapless"] = this.gapless;
    }
    if (this.error !== undefined) {
      observed["error"] = this.error;
    }
    return observed;
  }
}

/**
 * A session watch's observation: every session item, the turn ids of its events in order
 * of first appearance, and turn `untilTurn` observed as a turn stream. Done once that
 * turn's terminal event arrived.
 */
export class SessionObservation implements StreamObserver<WatchSessionItem> {
  readonly sessions: Observation[] = [];
  readonly turns: string[] = [];
  readonly turn = new TurnObservation();
  error: Observation | undefined;

  constructor(readonly untilTurn: string) {}

  get ready(): boolean {
    return this.sessions.length > 0;
  }

  add(item: WatchSessionItem): boolean {
    switch (item.kind) {
      case "session":
        this.sessions.push(json(SessionSchema, item.session));
        break;
      case "event":
        if (!this.turns.includes(item.event.turnId)) {
          this.turns.push(item.event.turnId);
        }
        if (item.event.turnId === this.untilTurn) {
          this.turn.add(item.event);
        }
        break;
      case "heartbeat":
        break;
    }
    return this.turn.terminal;
  }

  get observation(): Observation {
    const { error: _, ...turn } = this.turn.observation;
    const observed: Observation = { sessions: [...this.sessions], turns: [...this.turns], ...turn };
    if (this.error !== undefined) {
      observed["error"] = this.error;
    }
    return observed;
  }
}
