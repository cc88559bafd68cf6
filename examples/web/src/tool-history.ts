// Tool calls in a stored history: the results its tool messages hold, and the calls its
// last answer made that have none yet.
import { type Message, Role } from "@agentskit/chat-client";
import type { MadeCall } from "./tool-ledger.js";

/** The results stored in `messages` (tool messages), by call id. */
export function storedResults(messages: readonly Message[]): Map<string, string> {
  const results = new Map<string, string>();
  for (const message of messages) {
    if (message.role === Role.TOOL && message.toolCallId) {
      results.set(message.toolCallId, message.content);
    }
  }
  return results;
}

/** The calls of the last answer that have no result yet, when the history ends with it. */
export function openCalls(messages: readonly Message[]): MadeCall[] {
  const results = new Set<string>();
  for (const message of [...messages].reverse()) {
    if (message.role === Role.TOOL) {
      results.add(message.toolCallId);
    } else if (message.role === Role.ASSISTANT && message.toolCalls.length > 0) {
      return message.toolCalls.filter((call) => !results.has(call.id));
    } else {
      return [];
    }
  }
  return [];
}
