// Following the open session live (WatchSession): every turn as it runs, whoever started
// it, and the session after every stored change. A watch that breaks, that the server ends,
// or that fell behind (ERROR_REASON_WATCH_BEHIND) is watched again after the last cursor
// received; the first session of each watch tells whether changes were missed.
import {
  type ChatClient,
  ChatError,
  Code,
  type Session,
  type TurnEvent,
} from "@agentskit/chat-client";

/** What a {@link SessionWatch} reports. */
export interface SessionWatchHandlers {
  /** The session as stored now: `first` on each (re)watch, then after every change. */
  session(session: Session, first: boolean): void;
  /** An event of one of the session's turns, tagged with its turn id. */
  event(event: TurnEvent): void;
  /** The watch ended for good (the session is gone, or the server has no watch). */
  ended(error: ChatError): void;
}

/** Codes after which watching again would fail the same way. */
const FINAL = new Set<Code>([
  Code.NotFound,
  Code.Unauthenticated,
  Code.PermissionDenied,
  Code.Unimplemented,
  Code.InvalidArgument,
  Code.FailedPrecondition,
]);

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 5_000;

/** One session followed until {@link SessionWatch.stop}. */
export class SessionWatch {
  readonly #client: ChatClient;
  readonly #sessionId: string;
  readonly #handlers: SessionWatchHandlers;
  readonly #controller = new AbortController();
  #cursor: bigint | undefined;

  /** Watch `sessionId` after `cursor` (the cursor of the session shown). */
  constructor(
    client: ChatClient,
    sessionId: string,
    cursor: bigint | undefined,
    handlers: SessionWatchHandlers,
  ) {
    this.#client = client;
    this.#sessionId = sessionId;
    this.#cursor = cursor;
    this.#handlers = handlers;
    void this.#run();
  }

  /** The cursor of the last session received. */
  get cursor(): bigint | undefined {
    return this.#cursor;
  }

  /** Stop watching. */
  stop(): void {
    this.#controller.abort();
  }

  async #run(): Promise<void> {
    const signal = this.#controller.signal;
    let failures = 0;
    while (!signal.aborted) {
      let first = true;
      try {
        const items = this.#client.watchSession(this.#sessionId, {
          afterCursor: this.#cursor,
          signal,
        });
        for await (const item of items) {
          failures = 0;
          if (item.kind === "session") {
            this.#cursor = item.session.cursor;
            this.#handlers.session(item.session, first);
            first = false;
          } else if (item.kind === "event") {
            this.#handlers.event(item.event);
          }
        }
        // The server ended the watch (it drains, say): watch again.
      } catch (error) {
        if (signal.aborted) {
          return;
        }
        const failure = ChatError.from(error);
        if (FINAL.has(failure.code)) {
          this.#handlers.ended(failure);
          return;
        }
      }
      failures += 1;
      await sleep(Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (failures - 1)), signal);
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
