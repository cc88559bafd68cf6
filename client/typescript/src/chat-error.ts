// The client's single error type, decoded from the gRPC status and its details.
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** gRPC status code names by Connect `Code`, as every gRPC library spells them. */
const GRPC_CODE_NAMES: Readonly<Record<Code, string>> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/** The gRPC name of a status code: `grpcCodeName(Code.NotFound) === "NOT_FOUND"`. */
export function grpcCodeName(code: Code): string {
  return GRPC_CODE_NAMES[code] ?? "UNKNOWN";
}

/** The decoded parts of a failed call; see {@link ChatError}. */
export interface ChatErrorInit {
  code: Code;
  message: string;
  reason?: string | undefined;
  domain?: string | undefined;
  metadata?: Readonly<Record<string, string>> | undefined;
  retryDelayMs?: number | undefined;
  turnId?: string | undefined;
  cause?: unknown;
}

/**
 * A call to the chat service failed: before the stream, during it, by its deadline or by
 * cancellation. Every failed call rejects (or its stream throws) with this error.
 *
 * Invalid arguments are not failed calls: a method given a fractional cursor, an unknown
 * role or the like rejects (a turn stream throws on its first iteration) with a
 * `TypeError` or `RangeError` before anything is sent, as the constructors do.
 */
export class ChatError extends Error {
  override readonly name = "ChatError";
  /** The status code (Connect's `Code`, numerically the gRPC code). */
  readonly code: Code;
  /** The gRPC name of `code`, such as `"NOT_FOUND"` or `"ABORTED"`. */
  readonly codeName: string;
  /** The status message; it never repeats request content. */
  readonly rawMessage: string;
  /**
   * The `google.rpc.ErrorInfo` reason, one of the `ErrorReason` names such as
   * `"ERROR_REASON_SESSION_BUSY"`; undefined when the error carries no ErrorInfo (a
   * client-side deadline, a cancellation, an unreachable server).
   */
  readonly reason: string | undefined;
  /** The ErrorInfo domain (`"chat.agentskit.dev"`), or undefined. */
  readonly domain: string | undefined;
  /** The ErrorInfo metadata, e.g. `field`, `limit`, `cursor` or `retry_after_ms`. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The `google.rpc.RetryInfo` delay in milliseconds, or undefined when none was sent. */
  readonly retryDelayMs: number | undefined;
  /**
   * The turn id of a failed turn stream (the generated one when the request had none), so
   * that the same turn can be retried: pass it as `turnId` and it never runs twice.
   * Undefined for the other calls.
   */
  readonly turnId: string | undefined;

  constructor(init: ChatErrorInit) {
    const codeName = grpcCodeName(init.code);
    const head = init.reason === undefined ? codeName : `${codeName} ${init.reason}`;
    super(init.message ? `${head}: ${init.message}` : head, { cause: init.cause });
    this.code = init.code;
    this.codeName = codeName;
    this.rawMessage = init.message;
    this.reason = init.reason;
    this.domain = init.domain;
    this.metadata = Object.freeze({ ...(init.metadata ?? {}) });
    this.retryDelayMs = init.retryDelayMs;
    this.turnId = init.turnId;
  }

  /**
   * The `retry_after_ms` metadata as a number, else the RetryInfo delay; undefined when
   * both are absent or malformed.
   */
  get retryAfterMs(): number | undefined {
    const raw = this.metadata["retry_after_ms"];
    if (raw === undefined) {
      return this.retryDelayMs;
    }
    const value = Number(raw);
    return /^\d+$/.test(raw) && Number.isSafeInteger(value) ? value : undefined;
  }

  /**
   * Translate anything a Connect call threw into a `ChatError`: the first ErrorInfo of the
   * status details gives reason, domain and metadata, the first RetryInfo the delay.
   * `turnId` names the turn whose stream failed.
   */
  static from(error: unknown, turnId?: string): ChatError {
    if (error instanceof ChatError) {
      if (turnId === undefined || error.turnId === turnId) {
        return error;
      }
      return new ChatError({
        code: error.code,
        message: error.rawMessage,
        reason: error.reason,
        domain: error.domain,
        metadata: error.metadata,
        retryDelayMs: error.retryDelayMs,
        turnId,
        cause: error.cause,
      });
    }
    const connectError = ConnectError.from(error);
    const [info] = connectError.findDetails(ErrorInfoSchema);
    const retry = connectError
      .findDetails(RetryInfoSchema)
      .find((detail) => detail.retryDelay !== undefined);
    let retryDelayMs: number | undefined;
    if (retry?.retryDelay !== undefined) {
      const { seconds, nanos } = retry.retryDelay;
      retryDelayMs = Math.floor(Number(seconds) * 1000 + nanos / 1_000_000);
    }
    return new ChatError({
      code: connectError.code,
      message: connectError.rawMessage,
      reason: info?.reason || undefined,
      domain: info?.domain || undefined,
      metadata: info?.metadata,
      retryDelayMs,
      turnId,
      cause: connectError,
    });
  }
}
