// The chat service client: one method per RPC, turn shortcuts, typed errors.
import {
  type CallOptions as ConnectCallOptions,
  type Client,
  Code,
  createClient,
  type Transport,
} from "@connectrpc/connect";
import {
  ChatService,
  type Definition,
  DisconnectMode,
  type HistoryMode,
  type Message,
  type Session,
  type StreamTurnResponse,
  type TurnRecord,
} from "./gen/agentskit/chat/v1/chat_pb.js";
import { ChatError } from "./chat-error.js";
import {
  checkReattach,
  isBroken,
  pause,
  type ReattachOptions,
  type ReattachPolicy,
  reattachPolicy,
  backoffMs,
} from "./reattach.js";
import {
  collectTurn,
  eventFromResponse,
  isTerminal,
  itemFromResponse,
  type TurnEvent,
  type TurnResult,
  type WatchSessionItem,
} from "./turn-event.js";
import {
  type DisconnectModeName,
  type HistoryModeName,
  type Int64Input,
  type MessageInput,
  newTurnId,
  optionalInt64,
  toHistoryMode,
  toInt64,
  toStreamTurnRequest,
  type ToolApprovalInput,
  type ToolDeclarationInput,
  type ToolResultInput,
  type TurnOperation,
  type TurnRequest,
} from "./turn-request.js";

/** Options of a {@link ChatClient}. */
export interface ChatClientOptions {
  /** Bearer token sent as `authorization: Bearer <token>` with every call; none when `""`. */
  readonly token?: string | undefined;
  /**
   * Default deadline of every call in milliseconds, a whole turn stream counting as one
   * call; none when omitted or `<= 0`.
   */
  readonly timeoutMs?: number | undefined;
  /** Headers sent with every call, before any per-call headers. */
  readonly headers?: HeadersInit | undefined;
  /**
   * How a continued turn's broken stream is followed again (see {@link ReattachOptions});
   * the defaults when omitted, never when `false`. Each call may override it.
   */
  readonly reattach?: ReattachOptions | false | undefined;
}

/** Options every method takes as its last argument. */
export interface CallOptions {
  /** Cancels the call (a turn stream included); the call then fails with `CANCELLED`. */
  readonly signal?: AbortSignal | undefined;
  /** Deadline of this call in milliseconds; the client default when omitted, none when `<= 0`. */
  readonly timeoutMs?: number | undefined;
  /** Extra headers for this call. */
  readonly headers?: HeadersInit | undefined;
}

/** Options of `createSession`. */
export interface CreateSessionOptions extends CallOptions {
  /** Session id chosen by the client; the server chooses one when omitted. */
  readonly sessionId?: string | undefined;
  /** Who keeps the messages: `"server"` (the default) or `"client"`. */
  readonly historyMode?: HistoryMode | HistoryModeName | undefined;
  /**
   * Pins the session to this served revision; when omitted, the server's rollout picks one
   * by the session id (see `Definition.servedRevisions`). A revision the server does not
   * serve is `FAILED_PRECONDITION` with reason `ERROR_REASON_REVISION_MISMATCH` and the
   * revision in `metadata.definition_revision`.
   */
  readonly revision?: Int64Input | undefined;
}

/** Options of `getDefinition`. */
export interface GetDefinitionOptions extends CallOptions {
  /**
   * A served revision to describe; the newest served one when omitted. A revision the
   * server does not serve is `FAILED_PRECONDITION` with reason
   * `ERROR_REASON_REVISION_MISMATCH`.
   */
  readonly revision?: Int64Input | undefined;
}

/** Options of calls that may be guarded by the session cursor. */
export interface CursorOptions extends CallOptions {
  /**
   * Run only while the session cursor still equals this value; otherwise `ChatError`
   * `ABORTED` with reason `ERROR_REASON_CONFLICT` and the current cursor in
   * `metadata.cursor`, and nothing changes.
   */
  readonly expectedCursor?: Int64Input | undefined;
}

/** Options of calls that stream a turn's events and may reattach to it. */
export interface StreamOptions extends CallOptions {
  /**
   * How this stream is followed again when it breaks (a turn started with
   * `onDisconnect: "continue"`, or `watchTurn`); the client's when omitted, never when
   * `false`. A turn that cancels on disconnect is never reattached.
   */
  readonly reattach?: ReattachOptions | false | undefined;
}

/**
 * Options of the turn shortcuts (`submit`, `retry`, `edit`, `regenerate`, `dispatch`,
 * `toolResults`).
 */
export interface TurnOptions extends CursorOptions, StreamOptions {
  /** The turn's idempotency key; a fresh one when omitted. */
  readonly turnId?: string | undefined;
  /**
   * `"continue"`: the turn runs to its end and commits even when its stream breaks, and
   * the client reattaches to it by itself; `"cancel"`: a disconnect stops it. Not sent
   * when omitted (the server then cancels).
   */
  readonly onDisconnect?: DisconnectMode | DisconnectModeName | undefined;
  /**
   * The tools the model may call in this turn (see {@link TurnRequest.tools}); send them
   * again with the `toolResults` that continues an answer calling them.
   */
  readonly tools?: readonly ToolDeclarationInput[] | undefined;
  /** `"auto"`, `"none"`, `"required"` or a declared tool's name; the model's default when omitted. */
  readonly toolChoice?: string | undefined;
  /** Whether the model may call several tools in one answer; not sent when omitted. */
  readonly parallelToolCalls?: boolean | undefined;
}

/** Options of `dispatch`. */
export interface DispatchOptions extends TurnOptions {
  /** Decisions on the last answer's calls that wait for approval. */
  readonly approvals?: readonly ToolApprovalInput[] | undefined;
}

/** Options of `watchTurn`. */
export interface WatchTurnOptions extends StreamOptions {
  /** The sequence of the last event the caller has; 0 (every event) when omitted. */
  readonly afterSequence?: Int64Input | undefined;
}

/** Options of `watchSession`. */
export interface WatchSessionOptions extends CallOptions {
  /** The cursor of the last session the caller has, to resume a watch. */
  readonly afterCursor?: Int64Input | undefined;
}

/** What `cancelTurn` did. */
export interface CancelTurnResult {
  /** True when the turn was running and this call stopped it. */
  readonly cancelled: boolean;
  /** The retained turn, when the turn id finished before; undefined otherwise. */
  readonly turn: TurnRecord | undefined;
}

/** Options of `submit`. */
export interface SubmitOptions extends TurnOptions {
  /** Id of the new user message; the server chooses one when omitted. */
  readonly messageId?: string | undefined;
}

/** Options of `listTurns`. */
export interface ListTurnsOptions extends CallOptions {
  /** At most this many turns; the server's default (20) when omitted or 0, at most 100. */
  readonly pageSize?: number | undefined;
  /** `nextPageToken` of the previous page of the same session. */
  readonly pageToken?: string | undefined;
}

/** What `truncateHistory` takes. */
export interface TruncateRequest {
  readonly sessionId: string;
  /** The last message to keep; every message is dropped when omitted. */
  readonly lastKeptMessageId?: string | undefined;
  /** See {@link CursorOptions.expectedCursor}. */
  readonly expectedCursor?: Int64Input | undefined;
}

/** A session and, for server-held history, its retained messages, oldest first. */
export interface SessionHistory {
  readonly session: Session;
  readonly messages: readonly Message[];
}

/** One page of a session's retained turns, newest first. */
export interface TurnPage {
  readonly turns: readonly TurnRecord[];
  /** Token of the next page; undefined on the last page. */
  readonly nextPageToken: string | undefined;
}

/**
 * A client of the AgentsKit Chat service over any Connect `Transport` (on Node.js:
 * `createNodeTransport` from `@agentskit/chat-client/node`).
 *
 * Every method rejects with {@link ChatError} when the call fails; a turn stream throws it
 * from the iteration, with the turn's `turnId`. Invalid arguments reject (a turn stream
 * throws) with `TypeError` or `RangeError` before anything is sent. int64 fields of responses (cursor, revision, usage, sequence) are
 * `bigint`; inputs accept `number | bigint`.
 */
export class ChatClient {
  readonly #rpc: Client<typeof ChatService>;
  readonly #options: ChatClientOptions;
  readonly #authorization: string | undefined;

  constructor(transport: Transport, options: ChatClientOptions = {}) {
    if (options.token !== undefined && /\s/.test(options.token)) {
      throw new TypeError("token must be a string without whitespace");
    }
    checkReattach(options.reattach);
    this.#rpc = createClient(ChatService, transport);
    this.#options = options;
    this.#authorization = options.token ? `Bearer ${options.token}` : undefined;
  }

  /** Every chat definition the server hosts, ordered by id. */
  async listDefinitions(options: CallOptions = {}): Promise<Definition[]> {
    const response = await this.#call(options, (call) => this.#rpc.listDefinitions({}, call));
    return response.definitions;
  }

  /** One chat definition by id: its newest served revision, or the one asked for. */
  async getDefinition(
    definitionId: string,
    options: GetDefinitionOptions = {},
  ): Promise<Definition> {
    const revision = optionalInt64(options.revision, "revision");
    const response = await this.#call(options, (call) =>
      this.#rpc.getDefinition({ definitionId, revision }, call),
    );
    return required(response.definition, "definition");
  }

  /** Start a session of a definition at its initial state. */
  async createSession(definitionId: string, options: CreateSessionOptions = {}): Promise<Session> {
    const request = {
      definitionId,
      sessionId: options.sessionId ?? "",
      historyMode: toHistoryMode(options.historyMode),
      definitionRevision: optionalInt64(options.revision, "revision"),
    };
    const response = await this.#call(options, (call) => this.#rpc.createSession(request, call));
    return required(response.session, "session");
  }

  /** A session and, for server-held history, its retained messages. */
  async getSession(sessionId: string, options: CallOptions = {}): Promise<SessionHistory> {
    const response = await this.#call(options, (call) => this.#rpc.getSession({ sessionId }, call));
    return { session: required(response.session, "session"), messages: response.messages };
  }

  /** Remove a session and its stored history (guarded by `expectedCursor` when given). */
  async deleteSession(sessionId: string, options: CursorOptions = {}): Promise<void> {
    const expectedCursor = optionalInt64(options.expectedCursor, "expectedCursor");
    await this.#call(options, (call) =>
      this.#rpc.deleteSession({ sessionId, expectedCursor }, call),
    );
  }

  /**
   * Drop the newest messages of a server-held history without running a turn: every
   * message after `lastKeptMessageId`, or all of them when it is omitted. The state is
   * reconciled on the next turn.
   */
  async truncateHistory(
    request: TruncateRequest,
    options: CallOptions = {},
  ): Promise<SessionHistory> {
    const wire = {
      sessionId: request.sessionId,
      lastKeptMessageId: request.lastKeptMessageId ?? "",
      expectedCursor: optionalInt64(request.expectedCursor, "expectedCursor"),
    };
    const response = await this.#call(options, (call) => this.#rpc.truncateHistory(wire, call));
    return { session: required(response.session, "session"), messages: response.messages };
  }

  /** Shortcut of `truncateHistory`: keep messages up to `lastKeptMessageId`. */
  truncate(
    sessionId: string,
    lastKeptMessageId?: string,
    options: CursorOptions = {},
  ): Promise<SessionHistory> {
    const { expectedCursor, ...call } = options;
    return this.truncateHistory({ sessionId, lastKeptMessageId, expectedCursor }, call);
  }

  /**
   * The record of a turn id the session retains: running, completed or failed. Runs
   * nothing; a turn id the session does not retain is `NOT_FOUND`
   * (`ERROR_REASON_TURN_NOT_FOUND`): that turn never finished and may run again.
   */
  async getTurn(sessionId: string, turnId: string, options: CallOptions = {}): Promise<TurnRecord> {
    const response = await this.#call(options, (call) =>
      this.#rpc.getTurn({ sessionId, turnId }, call),
    );
    return required(response.turn, "turn");
  }

  /** One page of the session's retained turns, newest first. */
  async listTurns(sessionId: string, options: ListTurnsOptions = {}): Promise<TurnPage> {
    const request = {
      sessionId,
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? "",
    };
    const response = await this.#call(options, (call) => this.#rpc.listTurns(request, call));
    return { turns: response.turns, nextPageToken: response.nextPageToken || undefined };
  }

  /** Every retained turn of the session, newest first, page by page. */
  async *allTurns(sessionId: string, options: CallOptions = {}): AsyncGenerator<TurnRecord> {
    let pageToken: string | undefined;
    do {
      const page = await this.listTurns(sessionId, { ...options, pageSize: 100, pageToken });
      yield* page.turns;
      pageToken = page.nextPageToken;
    } while (pageToken !== undefined);
  }

  /**
   * Run one turn and yield its events as they arrive. The call starts on the first
   * iteration. Leaving the loop early (`break`, `return`, a throw) or aborting
   * `options.signal` cancels the call on the server. An event of a kind this client does
   * not know is skipped. The iteration throws {@link ChatError} when the call fails, its
   * `turnId` being the turn's (generated when the request had none): pass it as `turnId`
   * to retry the same turn, which never runs twice.
   *
   * A turn started with `onDisconnect: "continue"` whose stream breaks (`UNAVAILABLE`, a
   * reset, a network error) is followed again with `WatchTurn` from the last event
   * received, as `options.reattach` says: the iteration goes on with the next event, each
   * event once. Leaving the loop or aborting the signal still only closes the stream; use
   * `cancelTurn` to stop such a turn.
   */
  async *streamTurn(request: TurnRequest, options: StreamOptions = {}): AsyncGenerator<TurnEvent> {
    const turnId = request.turnId || newTurnId();
    const wire = toStreamTurnRequest(request, turnId);
    const policy =
      wire.onDisconnect === DisconnectMode.CONTINUE
        ? reattachPolicy(options.reattach, this.#options.reattach)
        : undefined;
    yield* this.#follow(wire.sessionId, turnId, 0n, options, policy, (call) =>
      this.#rpc.streamTurn(wire, call),
    );
  }

  /**
   * Follow a turn by id: the events after `options.afterSequence` (all when omitted),
   * numbered as the turn numbered them, first those missed, then live ones, up to the
   * terminal event. A finished turn whose events are no longer kept answers with its
   * recorded outcome (`started.duplicate` set). Watching never starts, changes or extends
   * the turn; leaving the loop only closes the stream. A broken stream is followed again
   * as `options.reattach` says (`false`: never). An unknown turn throws `NOT_FOUND`
   * (`ERROR_REASON_TURN_NOT_FOUND`).
   */
  async *watchTurn(
    sessionId: string,
    turnId: string,
    options: WatchTurnOptions = {},
  ): AsyncGenerator<TurnEvent> {
    const after = toInt64(options.afterSequence ?? 0, "afterSequence");
    if (after < 0n) {
      throw new RangeError("afterSequence must not be negative");
    }
    const policy = reattachPolicy(options.reattach, this.#options.reattach);
    yield* this.#follow(sessionId, turnId, after, options, policy, (call) =>
      this.#rpc.watchTurn({ sessionId, turnId, afterSequence: after }, call),
    );
  }

  /**
   * Stop a running turn: nothing is committed and its streams (its starter's and every
   * watcher's) end with a `failed` event of code `"cancelled"`; the turn id may run again.
   * A turn that is not running is left as it is (`cancelled: false`).
   */
  async cancelTurn(
    sessionId: string,
    turnId: string,
    options: CallOptions = {},
  ): Promise<CancelTurnResult> {
    const response = await this.#call(options, (call) =>
      this.#rpc.cancelTurn({ sessionId, turnId }, call),
    );
    return { cancelled: response.cancelled, turn: response.turn };
  }

  /**
   * Follow a session live: the session first, then every turn's events as they happen,
   * whoever started them (each tagged with its `turnId`), the session again after every
   * stored change, and a heartbeat after a silence. The stream stays open until the caller
   * leaves the loop or aborts. A watcher that falls too far behind gets `ABORTED`
   * (`ERROR_REASON_WATCH_BEHIND`, `metadata.cursor`): watch again with that `afterCursor`.
   * A broken session watch is not resumed by itself.
   */
  async *watchSession(
    sessionId: string,
    options: WatchSessionOptions = {},
  ): AsyncGenerator<WatchSessionItem> {
    const afterCursor = optionalInt64(options.afterCursor, "afterCursor");
    const cancel = linkedAbort(options.signal);
    try {
      const stream = this.#rpc.watchSession(
        { sessionId, afterCursor },
        this.#callOptions({ ...options, signal: cancel.signal }),
      );
      for await (const response of stream) {
        const item = itemFromResponse(response);
        if (item !== undefined) {
          yield item;
        }
      }
    } catch (error) {
      throw ChatError.from(error);
    } finally {
      cancel.abort();
    }
  }

  /**
   * The events of `open`'s stream after `after`, then, while `policy` allows and the
   * stream broke, those of `WatchTurn` from the last one received. The deadline covers
   * every stream together.
   */
  async *#follow(
    sessionId: string,
    turnId: string,
    after: bigint,
    options: CallOptions,
    policy: ReattachPolicy | undefined,
    open: (call: ConnectCallOptions) => AsyncIterable<StreamTurnResponse>,
  ): AsyncGenerator<TurnEvent> {
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs;
    const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
    let last = after;
    let seen = false;
    let ended = false;
    let attempt = 0;
    let broke: ChatError | undefined;
    // A recorded outcome (a repeat: `started.duplicate`) is numbered by the answer that
    // sends it, from its afterSequence + 1, not as the turn numbered its events: after a
    // break in it, it is followed again from 0 (the same repeat, numbered from 1) and that
    // numbering is shifted onto the one already yielded.
    let repeat: bigint | undefined; // the sequence yielded before the repeat's first event
    let shift = 0n; // what the current stream's sequences are shifted by
    let stream = open;
    for (;;) {
      let failure: ChatError;
      const cancel = linkedAbort(options.signal);
      try {
        const call = this.#callOptions({
          ...options,
          timeoutMs: remaining(deadline, turnId),
          signal: cancel.signal,
        });
        for await (const response of stream(call)) {
          if (response.sequence !== 0n && shift !== 0n) {
            response.sequence += shift;
          }
          if (response.sequence <= last && broke !== undefined) {
            continue; // already yielded before the stream broke
          }
          if (
            repeat === undefined &&
            response.event.case === "started" &&
            response.event.value.duplicate &&
            response.sequence > 0n
          ) {
            repeat = response.sequence - 1n;
          }
          last = response.sequence;
          seen = true;
          attempt = 0;
          const event = eventFromResponse(response);
          if (event !== undefined) {
            ended ||= isTerminal(event);
            yield event;
          }
        }
        return; // the turn's terminal event, or a watch after it: the stream is complete
      } catch (error) {
        failure = ChatError.from(error, turnId);
      } finally {
        cancel.abort(); // ends the call when the caller left the loop early
      }
      if (ended && policy !== undefined) {
        return; // the turn's last event arrived: what broke after it is of no matter
      }
      if (broke !== undefined && !seen && failure.reason === "ERROR_REASON_TURN_NOT_FOUND") {
        throw broke; // the turn never started: the same turn id may be sent again
      }
      const aborted = options.signal?.aborted === true;
      if (
        policy === undefined ||
        aborted ||
        !isBroken(failure, aborted) ||
        attempt >= policy.maxAttempts
      ) {
        throw failure;
      }
      broke ??= failure;
      attempt += 1;
      const delayMs = backoffMs(policy, attempt);
      policy.onReattach?.({ turnId, attempt, delayMs, afterSequence: last, error: failure });
      await pause(delayMs, options.signal, turnId);
      const afterSequence = repeat === undefined ? last : 0n;
      shift = repeat ?? 0n;
      stream = (call) => this.#rpc.watchTurn({ sessionId, turnId, afterSequence }, call);
    }
  }

  /** Run one turn to its end and collect its events; a `failed` event does not throw. */
  runTurn(request: TurnRequest, options: StreamOptions = {}): Promise<TurnResult> {
    const turnId = request.turnId || newTurnId();
    return collectTurn(turnId, this.streamTurn({ ...request, turnId }, options));
  }

  /** Append a user message to a server-held history and stream the turn's events. */
  submit(
    sessionId: string,
    content: string,
    options: SubmitOptions = {},
  ): AsyncGenerator<TurnEvent> {
    const { messageId, ...rest } = options;
    const value = messageId === undefined ? { content } : { content, messageId };
    return this.#shortcut(sessionId, { case: "submit", value }, rest);
  }

  /** Send a user message again (the last one when omitted) and stream the events. */
  retry(
    sessionId: string,
    messageId?: string,
    options: TurnOptions = {},
  ): AsyncGenerator<TurnEvent> {
    return this.#shortcut(
      sessionId,
      { case: "retry", value: { messageId: messageId ?? "" } },
      options,
    );
  }

  /** Change a user message, drop every later message and stream the turn's events. */
  edit(
    sessionId: string,
    messageId: string,
    content: string,
    options: TurnOptions = {},
  ): AsyncGenerator<TurnEvent> {
    return this.#shortcut(sessionId, { case: "edit", value: { messageId, content } }, options);
  }

  /** Answer again (the last assistant message when omitted) and stream the events. */
  regenerate(
    sessionId: string,
    messageId?: string,
    options: TurnOptions = {},
  ): AsyncGenerator<TurnEvent> {
    const value = { messageId: messageId ?? "" };
    return this.#shortcut(sessionId, { case: "regenerate", value }, options);
  }

  /**
   * Send a whole client-held history and stream the events of its last user message. A
   * history that ends with `"tool"` messages answering the last answer's pending calls
   * (with `options.approvals` deciding on those waiting for approval) continues that
   * answer instead.
   */
  dispatch(
    sessionId: string,
    messages: readonly MessageInput[],
    options: DispatchOptions = {},
  ): AsyncGenerator<TurnEvent> {
    const { approvals, ...rest } = options;
    return this.#shortcut(sessionId, { case: "dispatch", value: { messages, approvals } }, rest);
  }

  /**
   * Continue the last answer of a server-held history, which waits for tools (its
   * `pendingToolCalls`): a result for each call waiting for one, a decision for each call
   * waiting for approval; stream the events of the continued answer. It goes to the
   * model, never through the routes. Declare the same `tools` as the turn that called
   * them. A denied call is answered for the model; an approved call without a result
   * comes back pending, for the client to run.
   */
  toolResults(
    sessionId: string,
    answers: {
      readonly results?: readonly ToolResultInput[] | undefined;
      readonly approvals?: readonly ToolApprovalInput[] | undefined;
    },
    options: TurnOptions = {},
  ): AsyncGenerator<TurnEvent> {
    return this.#shortcut(sessionId, { case: "toolResults", value: answers }, options);
  }

  #shortcut(
    sessionId: string,
    operation: TurnOperation,
    options: TurnOptions,
  ): AsyncGenerator<TurnEvent> {
    const {
      turnId,
      expectedCursor,
      onDisconnect,
      tools,
      toolChoice,
      parallelToolCalls,
      ...call
    } = options;
    return this.streamTurn(
      {
        sessionId,
        operation,
        turnId,
        expectedCursor,
        onDisconnect,
        tools,
        toolChoice,
        parallelToolCalls,
      },
      call,
    );
  }

  #callOptions(options: CallOptions): ConnectCallOptions {
    const headers = new Headers(this.#options.headers);
    new Headers(options.headers).forEach((value, key) => headers.set(key, value));
    if (this.#authorization !== undefined) {
      headers.set("authorization", this.#authorization);
    }
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs;
    // Connect ends a call at once on a timeout <= 0; here that means no deadline.
    const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
    return { headers, timeoutMs: deadline, signal: options.signal };
  }

  async #call<T>(
    options: CallOptions,
    invoke: (call: ConnectCallOptions) => Promise<T>,
  ): Promise<T> {
    const cancel = linkedAbort(options.signal);
    try {
      return await invoke(this.#callOptions({ ...options, signal: cancel.signal }));
    } catch (error) {
      throw ChatError.from(error);
    } finally {
      cancel.abort();
    }
  }
}

/** Create a {@link ChatClient}; the same as `new ChatClient(transport, options)`. */
export function createChatClient(
  transport: Transport,
  options: ChatClientOptions = {},
): ChatClient {
  return new ChatClient(transport, options);
}

/**
 * A controller aborted with the caller's signal, but without its reason: Connect reports
 * an abort without a reason as CANCELLED, whatever reason the caller gave.
 */
function linkedAbort(signal: AbortSignal | undefined): { signal: AbortSignal; abort(): void } {
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  if (signal?.aborted) {
    stop();
  }
  signal?.addEventListener("abort", stop, { once: true });
  return {
    signal: controller.signal,
    abort() {
      signal?.removeEventListener("abort", stop);
      controller.abort();
    },
  };
}

/**
 * The time left before `deadline` for the next stream: 0 (none) without a deadline;
 * `DEADLINE_EXCEEDED` when it passed while reattaching.
 */
function remaining(deadline: number | undefined, turnId: string): number {
  if (deadline === undefined) {
    return 0; // none
  }
  const left = deadline - Date.now();
  if (left <= 0) {
    throw new ChatError({
      code: Code.DeadlineExceeded,
      message: "the deadline passed before the turn ended",
      turnId,
    });
  }
  return left;
}

function required<T>(value: T | undefined, field: string): T {
  if (value === undefined) {
    throw new ChatError({ code: Code.Internal, message: `the response has no ${field}` });
  }
  return value;
}
