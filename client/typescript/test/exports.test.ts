// The public names of the package, pinned: adding or removing one is a deliberate change.
import assert from "node:assert/strict";
import { test } from "node:test";

test("the package exports exactly its public API", async () => {
  const main = await import("@agentskit/chat-client");
  assert.deepEqual(Object.keys(main).sort(), [
    "ChatClient",
    "ChatError",
    "ChatService",
    "Code",
    "DisconnectMode",
    "ErrorReason",
    "HistoryMode",
    "Operation",
    "Role",
    "TurnKind",
    "TurnOutcome",
    "commandHints",
    "createChatClient",
    "eligibleRoutes",
    "grpcCodeName",
    "newTurnId",
  ]);
  const node = await import("@agentskit/chat-client/node");
  assert.deepEqual(Object.keys(node).sort(), ["createNodeTransport"]);
});
