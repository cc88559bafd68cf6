// Building a StreamTurnRequest: operations, turn ids, cursors, messages and tools.
import { create } from "@bufbuild/protobuf";
import {
  DisconnectMode,
  HistoryMode,
  type Message,
  MessageSchema,
  Role,
  type StreamTurnRequest,
  StreamTurnRequestSchema,
  type ToolApproval,
  ToolApprovalSchema,
  type ToolDeclaration,
  ToolDeclarationSchema,
  type ToolResult,
  ToolResultSchema,
} from "./gen/agentskit/chat/v1/chat_pb.js";

/** A cursor or other int64 input: a safe integer `number` or a `bigint`. */
export type Int64Input = number | bigint;

/** Roles by name, as the Python client spells them. */
export type RoleName = "user" | "assistant" | "system" | "tool";

/** History modes by name: `"server"` keeps the messages, `"client"` sends them each turn. */
export type HistoryModeName = "server" | "client";

/**
 * What a disconnect of the turn's stream does to the turn: `"cancel"` (the default) stops
 * it and commits nothing; `"continue"` lets it run to its end and commit, and the client
 * reattaches by itself when the stream breaks (see `ReattachOptions`).
 */
export type DisconnectModeName = "cancel" | "continue";

/** A message of a client-held history, sent by `dispatch`. */
export interface MessageInput {
  /** Unique within the session, chosen by the client. */
  readonly id: string;
  /** Its author: a `Role` value or its name. */
  readonly role: Role | RoleName;
  /** Its text; for a `"tool"` message, the tool's result. */
  readonly content: string;
  /**
   * For an assistant message: the tools it called, in order (`arguments` as JSON text,
   * exactly as the model wrote them).
   */
  readonly toolCalls?: readonly { id: string; name: string; arguments: string }[] | undefined;
  /** For a `"tool"` message: the id of the call it is the result of. */
  readonly toolCallId?: string | undefined;
}

/**
 * A tool the model may call in a turn. The client runs it: an answer that calls it
 * completes waiting for its result (`TurnResult.pendingToolCalls`).
 */
export interface ToolDeclarationInput {
  /** Letters, digits, `_` and `-`, at most 64 characters. */
  readonly name: string;
  /** What the tool does, for the model. */
  readonly description?: string | undefined;
  /** The arguments' JSON Schema (an object schema); sent as compact JSON text. */
  readonly parameters?: Record<string, unknown> | undefined;
}

/** The result of one call the last answer waits on. */
export interface ToolResultInput {
  /** The call answered. */
  readonly toolCallId: string;
  /** The tool's output, as the model should read it (often JSON text). */
  readonly content: string;
  /** Id of the tool message the result becomes; the server chooses one when omitted. */
  readonly messageId?: string | undefined;
}

/** A decision on one call that waits for approval (`ToolWait.APPROVAL`). */
export interface ToolApprovalInput {
  /** The call decided on. */
  readonly toolCallId: string;
  /** True lets the call run; false denies it: the model then reads a denied result. */
  readonly approved: boolean;
  /** Why, passed to the model with a denial. */
  readonly reason?: string | undefined;
}

/** What a turn does: the `operation` oneof of `StreamTurnRequest`. */
export type TurnOperation =
  | { readonly case: "submit"; readonly value: { content: string; messageId?: string } }
  | { readonly case: "retry"; readonly value: { messageId?: string } }
  | { readonly case: "edit"; readonly value: { messageId: string; content: string } }
  | { readonly case: "regenerate"; readonly value: { messageId?: string } }
  | {
      readonly case: "dispatch";
      readonly value: {
        messages: readonly MessageInput[];
        /** Decisions on the last answer's calls that wait for approval. */
        approvals?: readonly ToolApprovalInput[];
      };
    }
  | {
      readonly case: "toolResults";
      readonly value: {
        /** Results of the calls waiting for one (or approved in this request). */
        results?: readonly ToolResultInput[];
        /** Decisions on the calls waiting for approval. */
        approvals?: readonly ToolApprovalInput[];
      };
    };

/** One turn to run: what `streamTurn` and `runTurn` take. */
export interface TurnRequest {
  /** The session to run the turn in. */
  readonly sessionId: string;
  /** What the turn does. */
  readonly operation: TurnOperation;
  /**
   * Idempotency key: a repeated turn id is never executed twice (the server repeats its
   * outcome). A fresh one is generated when omitted; pass one to retry the same turn.
   */
  readonly turnId?: string | undefined;
  /**
   * Run only while the session cursor still equals this value; otherwise `ChatError`
   * `ABORTED` with reason `ERROR_REASON_CONFLICT` and the current cursor in
   * `metadata.cursor`.
   */
  readonly expectedCursor?: Int64Input | undefined;
  /**
   * What a disconnect of the stream does to the turn: a `DisconnectMode` value or its
   * name; not sent when omitted (the server then cancels the turn).
   */
  readonly onDisconnect?: DisconnectMode | DisconnectModeName | undefined;
  /**
   * The tools the model may call in this turn; send them with every turn that may call
   * them, the `toolResults` that continues an answer included. A route's answer never
   * calls a tool.
   */
  readonly tools?: readonly ToolDeclarationInput[] | undefined;
  /**
   * `"auto"`, `"none"`, `"required"`, or the name of the one declared tool the model must
   * call; the model's default when omitted.
   */
  readonly toolChoice?: string | undefined;
  /** Whether the model may call several tools in one answer; not sent when omitted. */
  readonly parallelToolCalls?: boolean | undefined;
}

const ROLES: Readonly<Record<RoleName, Role>> = {
  user: Role.USER,
  assistant: Role.ASSISTANT,
  system: Role.SYSTEM,
  tool: Role.TOOL,
};

/** A fresh turn id: a random (version 4) UUID as 32 hex digits. */
export function newTurnId(): string {
  return turnIdFrom(globalThis.crypto);
}

/** The random source of turn ids: Web Crypto, whose `randomUUID` may be missing. */
export type RandomSource = Partial<Pick<Crypto, "randomUUID" | "getRandomValues">>;

/**
 * A turn id from `source`: its `randomUUID` where it has one, else 16 bytes of
 * `getRandomValues` laid out as a version 4 UUID (`randomUUID` is missing outside secure
 * browser contexts and on some JavaScript engines, such as Hermes with a polyfill).
 */
export function turnIdFrom(source: RandomSource | undefined): string {
  if (typeof source?.randomUUID === "function") {
    return source.randomUUID().replaceAll("-", "");
  }
  if (typeof source?.getRandomValues !== "function") {
    throw new TypeError("no crypto.getRandomValues to make a turn id: pass turnId");
  }
  const bytes = source.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40; // version 4
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // RFC 4122 variant
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** An int64 input as the `bigint` protobuf-es uses; rejects fractions and unsafe numbers. */
export function toInt64(value: Int64Input, name = "value"): bigint {
  if (typeof value === "bigint") {
    return value;
  }
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(`${name} must be an integer, or a bigint beyond 2^53`);
  }
  return BigInt(value);
}

/** The int64 input, converted, or undefined when it was not given. */
export function optionalInt64(value: Int64Input | undefined, name: string): bigint | undefined {
  return value === undefined ? undefined : toInt64(value, name);
}

/** A message of a client-held history as the contract's `Message`. */
export function toMessage(input: MessageInput): Message {
  const role = typeof input.role === "string" ? ROLES[input.role] : input.role;
  if (role === undefined) {
    throw new RangeError(`unknown role: ${String(input.role)}`);
  }
  return create(MessageSchema, {
    id: input.id,
    role,
    content: input.content,
    toolCalls: (input.toolCalls ?? []).map(({ id, name, arguments: args }) => ({
      id,
      name,
      arguments: args,
    })),
    toolCallId: input.toolCallId ?? "",
  });
}

/** A tool declaration as the contract's `ToolDeclaration`. */
export function toToolDeclaration(input: ToolDeclarationInput): ToolDeclaration {
  return create(ToolDeclarationSchema, {
    name: input.name,
    description: input.description ?? "",
    parametersJson: input.parameters === undefined ? "" : JSON.stringify(input.parameters),
  });
}

/** A tool result as the contract's `ToolResult`. */
export function toToolResult(input: ToolResultInput): ToolResult {
  return create(ToolResultSchema, {
    toolCallId: input.toolCallId,
    content: input.content,
    messageId: input.messageId ?? "",
  });
}

/** An approval decision as the contract's `ToolApproval`. */
export function toToolApproval(input: ToolApprovalInput): ToolApproval {
  return create(ToolApprovalSchema, {
    toolCallId: input.toolCallId,
    approved: input.approved,
    reason: input.reason ?? "",
  });
}

/** A history mode given by name or value as the contract's `HistoryMode`. */
export function toHistoryMode(mode: HistoryMode | HistoryModeName | undefined): HistoryMode {
  switch (mode) {
    case undefined:
    case "server":
      return HistoryMode.SERVER;
    case "client":
      return HistoryMode.CLIENT;
    default:
      return mode;
  }
}

/** A disconnect mode given by name or value as the contract's `DisconnectMode`. */
export function toDisconnectMode(
  mode: DisconnectMode | DisconnectModeName | undefined,
): DisconnectMode {
  switch (mode) {
    case undefined:
      return DisconnectMode.UNSPECIFIED;
    case "cancel":
      return DisconnectMode.CANCEL;
    case "continue":
      return DisconnectMode.CONTINUE;
    default:
      if (typeof mode !== "number" || DisconnectMode[mode] === undefined) {
        throw new RangeError(`unknown disconnect mode: ${String(mode)}`);
      }
      return mode;
  }
}

/** The wire request of a turn; `turnId` must already be chosen. */
export function toStreamTurnRequest(request: TurnRequest, turnId: string): StreamTurnRequest {
  const operation = request.operation;
  const expectedCursor = optionalInt64(request.expectedCursor, "expectedCursor");
  const onDisconnect = toDisconnectMode(request.onDisconnect);
  const base = {
    sessionId: request.sessionId,
    turnId,
    expectedCursor,
    onDisconnect,
    tools: (request.tools ?? []).map(toToolDeclaration),
    toolChoice: request.toolChoice ?? "",
    parallelToolCalls: request.parallelToolCalls,
  };
  switch (operation.case) {
    case "dispatch":
      return create(StreamTurnRequestSchema, {
        ...base,
        operation: {
          case: "dispatch",
          value: {
            messages: operation.value.messages.map(toMessage),
            approvals: (operation.value.approvals ?? []).map(toToolApproval),
          },
        },
      });
    case "toolResults":
      return create(StreamTurnRequestSchema, {
        ...base,
        operation: {
          case: "toolResults",
          value: {
            results: (operation.value.results ?? []).map(toToolResult),
            approvals: (operation.value.approvals ?? []).map(toToolApproval),
          },
        },
      });
    case "submit":
    case "retry":
    case "edit":
    case "regenerate":
      return create(StreamTurnRequestSchema, {
        ...base,
        operation: { case: operation.case, value: { ...operation.value } },
      });
    default:
      throw new TypeError("unknown turn operation");
  }
}
