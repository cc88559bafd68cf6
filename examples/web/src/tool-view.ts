// How a tool call reads on its card: where it is in words, its arguments and its result.
import { ToolWait } from "@agentskit/chat-client";

/** Where a call is, in the words its card shows. */
export type ToolStatus =
  | "running"
  | "waiting for result"
  | "waiting for approval"
  | "approved"
  | "denied"
  | "done"
  | "unanswered";

/** A person's decision on a call that waits for approval. */
export interface ToolDecision {
  readonly approved: boolean;
  /** Why it was denied; empty when no reason was given (or it was approved). */
  readonly reason: string;
}

/** Everything the page knows of one call: from the stream, the history and this page. */
export interface ToolCallFacts {
  readonly id: string;
  readonly name: string;
  /** The arguments as JSON text: so far, while the model still writes them. */
  readonly arguments: string;
  /** The model is still writing the arguments. */
  readonly writing: boolean;
  /** What the answer waits on the call for, while it waits. */
  readonly wait: ToolWait | undefined;
  /** The decision taken on the call, when it waited for approval. */
  readonly decision: ToolDecision | undefined;
  /** The page is running the tool. */
  readonly running: boolean;
  /** The call's result (the tool message's content), once there is one. */
  readonly result: string | undefined;
}

/** A call as its card shows it. */
export interface ToolCallView {
  readonly id: string;
  readonly name: string;
  readonly status: ToolStatus;
  /** The arguments, indented when they are complete JSON. */
  readonly arguments: string;
  /** The result, indented when it is JSON, or the denial in words; none before either. */
  readonly result: string | undefined;
}

/** The result the service stores for a denied call (a reason may follow). */
const DENIED = "The user denied this tool call.";
const REASON = " Reason: ";

/** The denial `result` records, if it is one: its reason, empty when none was given. */
export function deniedReason(result: string): string | undefined {
  if (!result.startsWith(DENIED)) {
    return undefined;
  }
  const rest = result.slice(DENIED.length);
  return rest.startsWith(REASON) ? rest.slice(REASON.length) : "";
}

/** `text` indented when it is JSON, else as it is. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The status of a call from what the page knows of it. */
export function toolStatus(facts: ToolCallFacts): ToolStatus {
  if (facts.decision?.approved === false) {
    return "denied";
  }
  if (facts.result !== undefined) {
    return deniedReason(facts.result) === undefined ? "done" : "denied";
  }
  if (facts.running || facts.writing) {
    return "running";
  }
  if (facts.decision?.approved === true) {
    return "approved";
  }
  switch (facts.wait) {
    case ToolWait.APPROVAL:
      return "waiting for approval";
    case ToolWait.RESULT:
      return "waiting for result";
    default:
      return "unanswered";
  }
}

/** What the card says the call gave: its result, or the denial and its reason. */
function resultText(facts: ToolCallFacts): string | undefined {
  const reason =
    facts.decision?.approved === false
      ? facts.decision.reason
      : facts.result === undefined
        ? undefined
        : deniedReason(facts.result);
  if (reason !== undefined) {
    return reason ? `Denied: ${reason}` : "Denied.";
  }
  return facts.result === undefined ? undefined : prettyJson(facts.result);
}

/** The card's view of a call. */
export function toolCallView(facts: ToolCallFacts): ToolCallView {
  return {
    id: facts.id,
    name: facts.name,
    status: toolStatus(facts),
    arguments: facts.writing ? facts.arguments : prettyJson(facts.arguments || "{}"),
    result: resultText(facts),
  };
}
