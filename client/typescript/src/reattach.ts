// When and how a turn stream that broke is followed again with WatchTurn.
import { Code } from "@connectrpc/connect";
import { ChatError } from "./chat-error.js";

/**
 * How a client follows a turn again when its stream breaks: a turn started with
 * `onDisconnect: "continue"` (and any `watchTurn`) whose stream ends with `UNAVAILABLE`,
 * a reset (`INTERNAL` without a reason) or a network error is watched again with
 * `WatchTurn` from the last sequence received, after a delay that starts at
 * `initialDelayMs` and doubles up to `maxDelayMs`, at most `maxAttempts` times in a row
 * without a new event. The caller sees one stream, each event once.
 */
export interface ReattachOptions {
  /** Attempts in a row without a new event before the error is thrown; 8 when omitted, 0 never reattaches. */
  readonly maxAttempts?: number | undefined;
  /** Delay before the first attempt in milliseconds; 100 when omitted. */
  readonly initialDelayMs?: number | undefined;
  /** The longest delay between attempts in milliseconds; 2000 when omitted. */
  readonly maxDelayMs?: number | undefined;
  /** Called before each attempt, e.g. to show that the answer is reconnecting. */
  readonly onReattach?: ((attempt: ReattachAttempt) => void) | undefined;
}

/** What `onReattach` is told before an attempt. */
export interface ReattachAttempt {
  /** The turn being followed. */
  readonly turnId: string;
  /** 1 for the first attempt after a break, then 2, 3... */
  readonly attempt: number;
  /** The delay before the attempt, in milliseconds. */
  readonly delayMs: number;
  /** The sequence of the last event received; the watch continues after it. */
  readonly afterSequence: bigint;
  /** Why the previous stream ended. */
  readonly error: ChatError;
}

/** A reattach policy with every value decided. */
export interface ReattachPolicy {
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  readonly onReattach: ((attempt: ReattachAttempt) => void) | undefined;
}

/** The policy of `options` over the client's, or undefined when reattaching is off. */
export function reattachPolicy(
  options: ReattachOptions | false | undefined,
  defaults: ReattachOptions | false | undefined,
): ReattachPolicy | undefined {
  if (options === false || (options === undefined && defaults === false)) {
    return undefined;
  }
  const base = defaults === false ? {} : (defaults ?? {});
  const chosen = { ...base, ...(options ?? {}) };
  const policy = {
    maxAttempts: count(chosen.maxAttempts, 8, "maxAttempts"),
    initialDelayMs: count(chosen.initialDelayMs, 100, "initialDelayMs"),
    maxDelayMs: count(chosen.maxDelayMs, 2_000, "maxDelayMs"),
    onReattach: chosen.onReattach,
  };
  return policy.maxAttempts === 0 ? undefined : policy;
}

/** Validate a reattach option at construction, so that a bad one fails early. */
export function checkReattach(options: ReattachOptions | false | undefined): void {
  reattachPolicy(options, undefined);
}

/** The delay before attempt `attempt` (1, 2, ...): doubling from the first, capped. */
export function backoffMs(policy: ReattachPolicy, attempt: number): number {
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
}

/**
 * Whether an error says the stream broke rather than that the call failed. Errors the
 * client makes of a dropped connection carry no ErrorInfo reason: UNAVAILABLE (also sent
 * by a draining server), INTERNAL (a reset stream, a cut mid-message), ABORTED (Node.js:
 * `ECONNRESET`, a destroyed stream) and CANCELLED when the caller did not abort (Node.js
 * closes the HTTP/2 streams of a dropped connection with CANCEL). A watch the server ended
 * for falling behind (`ERROR_REASON_WATCH_BEHIND`) is followed again as well.
 */
export function isBroken(error: ChatError, callerAborted: boolean): boolean {
  switch (error.code) {
    case Code.Unavailable:
      return true;
    case Code.Internal:
      return error.reason === undefined;
    case Code.Aborted:
      return error.reason === undefined || error.reason === "ERROR_REASON_WATCH_BEHIND";
    case Code.Canceled:
      return !callerAborted && error.reason === undefined;
    default:
      return false;
  }
}

/** Wait `ms`; rejects with a `CANCELLED` ChatError when `signal` aborts first. */
export function pause(ms: number, signal: AbortSignal | undefined, turnId: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = (): void => {
      clearTimeout(timer);
      reject(new ChatError({ code: Code.Canceled, message: "the call was cancelled", turnId }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }, ms);
    if (signal?.aborted) {
      aborted();
      return;
    }
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

function count(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) {
    return fallback;
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer`);
  }
  return value;
}
