// @agentskit/chat-client: a typed client of the AgentsKit Chat session service.
// The Node.js transport lives in "@agentskit/chat-client/node", so that this entry point
// stays usable with any Connect transport, in a browser too.
export { Code } from "@connectrpc/connect";
export type { Transport } from "@connectrpc/connect";
export { ChatClient, createChatClient } from "./chat-client.js";
export type {
  CallOptions,
  CancelTurnResult,
  ChatClientOptions,
  CreateSessionOptions,
  CursorOptions,
  DispatchOptions,
  GetDefinitionOptions,
  ListTurnsOptions,
  SessionHistory,
  StreamOptions,
  SubmitOptions,
  TruncateRequest,
  TurnOptions,
  TurnPage,
  WatchSessionOptions,
  WatchTurnOptions,
} from "./chat-client.js";
export type { ReattachAttempt, ReattachOptions } from "./reattach.js";
export { ChatError, grpcCodeName } from "./chat-error.js";
export type { ChatErrorInit } from "./chat-error.js";
export { commandHints, eligibleRoutes } from "./hints.js";
export type { EligibleRoute, OfferedRoute, SnapshotLike } from "./hints.js";
export type {
  TurnEvent,
  TurnEventEnvelope,
  TurnEventKind,
  TurnResult,
  WatchSessionItem,
} from "./turn-event.js";
export { newTurnId } from "./turn-request.js";
export type {
  DisconnectModeName,
  HistoryModeName,
  Int64Input,
  MessageInput,
  RoleName,
  ToolApprovalInput,
  ToolDeclarationInput,
  ToolResultInput,
  TurnOperation,
  TurnRequest,
} from "./turn-request.js";
export {
  ChatService,
  DisconnectMode,
  ErrorReason,
  HistoryMode,
  Operation,
  Role,
  ToolWait,
  TurnKind,
  TurnOutcome,
} from "./gen/agentskit/chat/v1/chat_pb.js";
export type {
  AnswerOrigin,
  Definition,
  Message,
  MigrationBlocked,
  PendingToolCall,
  RouteInfo,
  ServedRevision,
  Session,
  Snapshot,
  StateInfo,
  TextDelta,
  ToolCall,
  ToolCallDelta,
  ToolCallEnded,
  ToolCallResult,
  ToolCallStarted,
  Transition,
  TurnCompleted,
  TurnDecision,
  TurnFailed,
  TurnRecord,
  TurnStarted,
  Usage,
  WatchHeartbeat,
} from "./gen/agentskit/chat/v1/chat_pb.js";
