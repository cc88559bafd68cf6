import { ChatClient, ChatError, newTurnId } from "@agentskit/chat-client";
import type { TurnRequest, TurnResult } from "@agentskit/chat-client";

const RETRYABLE = new Set(["ERROR_REASON_SESSION_BUSY", "ERROR_REASON_TURN_IN_PROGRESS"]);

export async function runWithRetry(
  client: ChatClient,
  request: TurnRequest,
  attempts = 3,
): Promise<TurnResult> {
  const turnId = request.turnId ?? newTurnId(); // one id for every attempt: it never runs twice
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.runTurn({ ...request, turnId });
    } catch (error) {
      const retryable = error instanceof ChatError && RETRYABLE.has(error.reason ?? "");
      if (!retryable || attempt >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, error.retryAfterMs ?? 100));
    }
  }
}
