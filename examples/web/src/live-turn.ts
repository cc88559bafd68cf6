// The turn the renderer shows streaming, and how a turn started elsewhere reads.
import { Operation, type TurnEvent } from "@agentskit/chat-client";
import type { ReplyView } from "./reply-view.js";
import type { TurnAction } from "./turn-action.js";

/** The turn being shown as it streams: this tab's, or one started elsewhere. */
export interface LiveTurn {
  readonly turnId: string;
  /** Started (or reattached to) by this tab; else seen through the session watch. */
  readonly own: boolean;
  /** How the history reads while it runs; the history as it is when unknown. */
  readonly action: TurnAction | undefined;
  readonly reply: ReplyView;
  /** The sequence of the last event shown. */
  last: bigint;
}

/** How a turn started elsewhere changes the history while it runs, from its first event. */
export function remoteAction(event: TurnEvent): TurnAction | undefined {
  if (event.kind !== "started") {
    return undefined;
  }
  const messageId = event.value.userMessageId;
  switch (event.value.operation) {
    case Operation.SUBMIT:
      return { kind: "submit", content: "" };
    case Operation.EDIT:
      return messageId ? { kind: "edit", messageId, content: "" } : undefined;
    case Operation.RETRY:
    case Operation.REGENERATE:
      return messageId ? { kind: "retry", messageId } : undefined;
    default:
      return undefined;
  }
}

/** Whether the event ends its turn. */
export function isTerminal(event: TurnEvent): boolean {
  return event.kind === "completed" || event.kind === "failed";
}
