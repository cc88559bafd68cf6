// @agentskit/chat-client: a typed client of the AgentsKit Chat session service.
// The Node.js transport lives in "@agentskit/chat-client/node", so that this entry point
// stays usable with any Connect transport, in a browser too.
export { Code } from "@connectrpc/connect";
export type { Transport } from "@connectrpc/connect";
export { ChatClient, createChatClient } from "./chat-client.js";
export type {
  CallOptions,
  ChatClientOptions,
  CreateSessionOptions,
  CursorOptions,
  ListTurnsOptions,
  SessionHistory,
  SubmitOptions,
  TruncateRequest,
  TurnOptions,
  TurnPage,
} from "./chat-client.js";
export { ChatError, grpcCodeName } from "./chat-error.js";
export type { ChatErrorInit } from "./chat-error.js";
export { commandHints, eligibleRoutes } from "./hints.js";
export type { EligibleRoute, OfferedRoute, SnapshotLike } from "./hints.js";
export type { TurnEvent, TurnEventEnvelope, TurnEventKind, TurnResult } from "./turn-event.js";
export { newTurnId } from "./turn-request.js";
export type {
  HistoryModeName,
  Int64Input,
  MessageInput,
  RoleName,
  TurnOperation,
  TurnRequest,
} from "./turn-request.js";
export {
  ChatService,
  ErrorReason,
  HistoryMode,
  Operation,
  Role,
  TurnKind,
  TurnOutcome,
} from "./gen/agentskit/chat/v1/chat_pb.js";
export type {
  AnswerOrigin,
  Definition,
  Message,
  RouteInfo,
  Session,
  Snapshot,
  StateInfo,
  TextDelta,
  Transition,
  TurnCompleted,
  TurnDecision,
  TurnFailed,
  TurnRecord,
  TurnStarted,
  Usage,
} from "./gen/agentskit/chat/v1/chat_pb.js";
