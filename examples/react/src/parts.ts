// The service's data parts in the AI SDK's UI message stream, and the messages that carry them.
import { getToolName, isToolUIPart, type DynamicToolUIPart, type ToolUIPart, type UIMessage } from "ai";
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

/** A tool call of an answer: a `tool-{name}` part (or a `dynamic-tool` one). */
export type ToolPart = ToolUIPart | DynamicToolUIPart;

/** Where a tool call is, in the words its card shows. */
export type ToolStatus = "running" | "waiting for approval" | "done" | "denied" | "error";

/** The status of `part`: an approved call runs (at the page) until its output is in. */
export function toolStatus(part: ToolPart): ToolStatus {
  switch (part.state) {
    case "input-streaming":
    case "input-available":
      return "running";
    case "approval-requested":
      return "waiting for approval";
    case "approval-responded":
      return part.approval.approved ? "running" : "denied";
    case "output-available":
      return "done";
    case "output-error":
      return "error";
    case "output-denied":
      return "denied";
  }
}

/** The tool's name of `part`. */
export const toolNameOf = (part: ToolPart): string => getToolName(part);

/** One piece of a message as the page draws it: a run of text, or a tool call. */
export type Segment =
  | { readonly kind: "text"; readonly key: string; readonly text: string }
  | { readonly kind: "tool"; readonly key: string; readonly part: ToolPart };

/** The text and tool calls of `message`, in order (consecutive text parts joined). */
export function segmentsOf(message: ChatMessage): Segment[] {
  const segments: Segment[] = [];
  message.parts.forEach((part, index) => {
    if (part.type === "text") {
      const previous = segments.at(-1);
      if (previous?.kind === "text") {
        segments[segments.length - 1] = { ...previous, text: previous.text + part.text };
      } else {
        segments.push({ kind: "text", key: `text-${index}`, text: part.text });
      }
    } else if (isToolUIPart(part)) {
      segments.push({ kind: "tool", key: part.toolCallId, part });
    }
  });
  return segments;
}

/** The tool calls of `message`. */
export function toolPartsOf(message: ChatMessage): ToolPart[] {
  return message.parts.filter((part): part is ToolPart => isToolUIPart(part));
}
