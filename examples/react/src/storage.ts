// The page keeps each chat's messages in the tab's session storage: the service keeps no
// content for a client-held chat, so a reload reopens the chat from here (and resumes its
// running turn from the service).
import type { ChatMessage } from "./parts.js";

const key = (chatId: string): string => `agentskit-react.messages.${chatId}`;

/** The messages stored for `chatId`; none when absent or unreadable. */
export function loadMessages(chatId: string): ChatMessage[] {
  try {
    const stored: unknown = JSON.parse(window.sessionStorage.getItem(key(chatId)) ?? "[]");
    return Array.isArray(stored) ? (stored as ChatMessage[]) : [];
  } catch {
    return [];
  }
}

/** Store the messages of `chatId` (best effort: a full storage only loses the reload). */
export function saveMessages(chatId: string, messages: readonly ChatMessage[]): void {
  try {
    window.sessionStorage.setItem(key(chatId), JSON.stringify(messages));
  } catch {
    // Storage full or disabled: the chat goes on, a reload starts it afresh.
  }
}
