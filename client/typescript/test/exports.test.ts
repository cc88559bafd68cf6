// The public names of the package, pinned: adding or removing one is a deliberate change.
import assert from "node:assert/strict";
import { test } from "node:test";
import type {
  CreateSessionOptions,
  Definition,
  DispatchOptions,
  GetDefinitionOptions,
  Int64Input,
  MigrationBlocked,
  PendingToolCall,
  ServedRevision,
  Session,
  ToolApprovalInput,
  ToolCall,
  ToolCallDelta,
  ToolCallEnded,
  ToolCallStarted,
  ToolDeclarationInput,
  ToolResultInput,
  TurnEvent,
  TurnOperation,
  TurnResult,
} from "@agentskit/chat-client";

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
    "ToolWait",
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

// The tool types, pinned by the compiler: the build fails when one goes missing or changes.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type ToolTypesPinned = [
  DispatchOptions["approvals"],
  PendingToolCall,
  ToolApprovalInput,
  ToolCall,
  ToolDeclarationInput,
  ToolResultInput,
  TurnResult["pendingToolCalls"],
  TurnResult["toolCalls"],
];
export const TOOL_EVENT_KINDS: {
  [Kind in "toolCallStarted" | "toolCallDelta" | "toolCallEnded"]: Same<
    Extract<TurnEvent, { kind: Kind }>["value"],
    { toolCallStarted: ToolCallStarted; toolCallDelta: ToolCallDelta; toolCallEnded: ToolCallEnded }[Kind]
  >;
} = { toolCallStarted: true, toolCallDelta: true, toolCallEnded: true };
export const TOOL_OPERATION: Extract<TurnOperation, { case: "toolResults" }>["case"] = "toolResults";

// The revision types, pinned the same way.
export const REVISION_TYPES: [
  Same<CreateSessionOptions["revision"], Int64Input | undefined>,
  Same<GetDefinitionOptions["revision"], Int64Input | undefined>,
  Same<Definition["servedRevisions"], ServedRevision[]>,
  Same<Session["migrationBlocked"], MigrationBlocked | undefined>,
  Same<ServedRevision["revision"] | MigrationBlocked["revision"], bigint>,
] = [true, true, true, true, true];
