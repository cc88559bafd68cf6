// The service's data parts in the AI SDK's UI message stream, and the messages that carry them.
import type { UIMessage } from "ai";
import type { Snapshot } from "./definitions.js";

/** How the service answered a turn (`data-agentskit-decision`). */
export interface Decision {
  /** "deterministic", "agentic", "repaired" or "fallback". */
  readonly kind: string;
  /** The route that answered; empty when the model did. */
  readonly route: string;
  readonly from: string;
  readonly to: string;
  /** True when a recorded decision was replayed instead of resolved again. */
  readonly replayed: boolean;
  readonly turnId: string;
}

/** A command the state offers: the input text that fires an eligible route. */
export interface Command {
  readonly route: string;
  readonly input: string;
}

/**
 * The conversation's snapshot (`data-agentskit-snapshot`), at a turn's start and end, with
 * the commands its state offers.
 */
export interface SnapshotPart extends Snapshot {
  readonly commands?: readonly Command[];
}

export type AgentskitData = {
  "agentskit-decision": Decision;
  "agentskit-snapshot": SnapshotPart;
};

export type ChatMessage = UIMessage<unknown, AgentskitData>;

type Json = Record<string, unknown>;
const record = (value: unknown): Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : {};
const text = (value: unknown): string => (typeof value === "string" ? value : "");
const texts = (value: unknown): string[] => (Array.isArray(value) ? value : []).map(text).filter(Boolean);

/** The kind as a class-safe word ("deterministic", "agentic", ...). */
function kindName(kind: string): string {
  return kind.toLowerCase().replace(/[^a-z]/g, "") || "unspecified";
}

/** The decision part of `message`, if it carries one. */
export function decisionOf(message: ChatMessage): Decision | undefined {
  for (const part of message.parts) {
    if (part.type === "data-agentskit-decision") {
      const data = record(part.data);
      return {
        kind: kindName(text(data.kind)),
        route: text(data.route),
        from: text(data.from),
        to: text(data.to),
        replayed: data.replayed === true,
        turnId: text(data.turnId),
      };
    }
  }
  return undefined;
}

/** The snapshot a data part of the service carries, if `type` names one. */
export function snapshotPart(type: string, data: unknown): SnapshotPart | undefined {
  if (type !== "data-agentskit-snapshot") {
    return undefined;
  }
  const body = record(data);
  const state = text(body.state);
  if (!state) {
    return undefined;
  }
  const commands = Array.isArray(body.commands)
    ? body.commands
        .map((command) => ({ route: text(record(command).route), input: text(record(command).input) }))
        .filter((command) => command.input !== "")
    : undefined;
  return {
    state,
    allowedEvents: texts(body.allowedEvents),
    actions: texts(body.actions),
    ...(commands === undefined ? {} : { commands }),
  };
}

/** The newest snapshot the messages carry. */
export function latestSnapshot(messages: readonly ChatMessage[]): SnapshotPart | undefined {
  for (const message of [...messages].reverse()) {
    for (const part of [...message.parts].reverse()) {
      const found = snapshotPart(part.type, "data" in part ? part.data : undefined);
      if (found !== undefined) {
        return found;
      }
    }
  }
  return undefined;
}

/** The newest state a decision moved to. */
export function latestState(messages: readonly ChatMessage[]): string | undefined {
  for (const message of [...messages].reverse()) {
    const decision = message.role === "assistant" ? decisionOf(message) : undefined;
    if (decision?.to) {
      return decision.to;
    }
  }
  return undefined;
}

/** The text of `message`'s text parts. */
export function textOf(message: ChatMessage): string {
  return message.parts.map((part) => (part.type === "text" ? part.text : "")).join("");
}
