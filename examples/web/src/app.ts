// The renderer: pick a definition, start or resume a session, run turns and show them.
//
// Turns run with onDisconnect "continue": the turn this tab runs is kept in sessionStorage
// (pending-turn.ts), so that a reload in the middle of the answer reattaches to it. The
// open session is watched (session-watch.ts), so that turns started elsewhere (another tab,
// another device) show as they stream. Tool calls show as cards; the page runs its own
// tools and asks for approvals (tool-desk.ts), and declares its tools with every turn.
import {
  type ChatClient,
  ChatError,
  Code,
  commandHints,
  type Definition,
  type Message,
  newTurnId,
  Role,
  type Session,
  type TurnEvent,
} from "@agentskit/chat-client";
import { rememberSession } from "./config.js";
import { byId, h, replaceChildren } from "./dom.js";
import {
  clearPendingTurn,
  loadPendingTurn,
  type PendingTurn,
  savePendingTurn,
} from "./pending-turn.js";
import { isTerminal, type LiveTurn, remoteAction } from "./live-turn.js";
import { PAGE_TOOLS } from "./page-tools.js";
import { decisionMeta, ReplyView } from "./reply-view.js";
import { SessionWatch } from "./session-watch.js";
import { type ShownTools, ToolDesk } from "./tool-desk.js";
import type { TurnAction } from "./turn-action.js";

export type { TurnAction } from "./turn-action.js";

const ROLE_NAMES: Readonly<Record<number, string>> = {
  [Role.USER]: "user",
  [Role.ASSISTANT]: "assistant",
  [Role.SYSTEM]: "system",
  [Role.TOOL]: "tool",
};

const ROLE_LABELS: Readonly<Record<string, string>> = {
  user: "You",
  assistant: "Assistant",
  system: "System",
  tool: "Tool",
};

/** What a failed call reads as: the status, its reason, and the server's message. */
export function describeError(error: unknown): string {
  if (error instanceof ChatError) {
    const reason = error.reason === undefined ? "" : ` (${error.reason})`;
    return `${error.codeName}${reason}: ${error.rawMessage || "no message"}`;
  }
  return error instanceof Error ? error.message : String(error);
}

export class App {
  readonly #client: ChatClient;
  readonly #desk: ToolDesk;
  #definitions: Definition[] = [];
  #definition: Definition | undefined;
  #session: Session | undefined;
  #messages: Message[] = [];
  /** The turn shown streaming, if any. */
  #live: LiveTurn | undefined;
  /** Ends this tab's own turn stream (the turn itself runs on). */
  #running: AbortController | undefined;
  /** Turn ids this tab started or reattached to: the session watch skips them. */
  readonly #ownTurns = new Set<string>();
  #watch: SessionWatch | undefined;
  #stopping = false;
  /** The page is being left: what its cut streams report is not the turns' end. */
  #leaving = false;
  /** The history reloads, one after the other. */
  #reloads: Promise<void> = Promise.resolve();
  #editing: string | undefined;

  readonly #definitionSelect = byId("definition", HTMLSelectElement);
  readonly #definitionDescription = byId("definition-description", HTMLParagraphElement);
  readonly #startForm = byId("start-form", HTMLFormElement);
  readonly #resumeForm = byId("resume-form", HTMLFormElement);
  readonly #resumeInput = byId("resume-id", HTMLInputElement);
  readonly #chat = byId("chat", HTMLElement);
  readonly #sessionId = byId("session-id", HTMLElement);
  readonly #sessionDefinition = byId("session-definition", HTMLElement);
  readonly #stateName = byId("state-name", HTMLElement);
  readonly #actions = byId("actions", HTMLUListElement);
  readonly #commands = byId("commands", HTMLDivElement);
  readonly #messageList = byId("messages", HTMLOListElement);
  readonly #composer = byId("composer", HTMLFormElement);
  readonly #input = byId("message-input", HTMLTextAreaElement);
  readonly #send = byId("send", HTMLButtonElement);
  readonly #stop = byId("stop", HTMLButtonElement);
  readonly #status = byId("status", HTMLParagraphElement);
  readonly #error = byId("error", HTMLParagraphElement);

  constructor(client: ChatClient) {
    this.#client = client;
    this.#desk = new ToolDesk(client, {
      changed: () => this.#render(),
      busy: () => this.#live !== undefined,
      send: (answer) => void this.turn({ kind: "toolResults", answer }),
      failed: (what, error) => this.#fail(what, error),
    });
    this.#startForm.addEventListener("submit", (event) => {
      event.preventDefault();
      void this.startSession(this.#definitionSelect.value);
    });
    this.#resumeForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const id = this.#resumeInput.value.trim();
      if (id) {
        void this.resume(id);
      }
    });
    this.#definitionSelect.addEventListener("change", () => this.#describeDefinition());
    this.#composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#submitInput();
    });
    this.#input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.#submitInput();
      }
    });
    this.#stop.addEventListener("click", () => this.stop());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.#live !== undefined) {
        this.stop();
      }
    });
    // A hidden tab stops watching (over HTTP/1.1 every watch holds one of the browser's few
    // connections to the server) and watches again, after the cursor shown, once visible.
    document.addEventListener("visibilitychange", () => this.#watchWhileVisible());
    // Leaving the page (a reload) cuts its streams: the turn runs on, and the next page
    // reattaches to it from what this one kept.
    window.addEventListener("pagehide", () => {
      this.#leaving = true;
    });
    window.addEventListener("pageshow", () => {
      this.#leaving = false;
    });
    this.#setBusy();
  }

  /** Load the definitions, then resume `sessionId` when given. */
  async start(sessionId: string | undefined): Promise<void> {
    this.#setStatus("Loading definitions…");
    try {
      this.#definitions = await this.#client.listDefinitions();
    } catch (error) {
      this.#fail("Could not load the definitions", error);
      this.#setStatus("Not connected.");
      return;
    }
    replaceChildren(
      this.#definitionSelect,
      ...this.#definitions.map((definition) =>
        h("option", { value: definition.id }, `${definition.id} (revision ${definition.revision})`),
      ),
    );
    this.#describeDefinition();
    this.#setStatus(`${this.#definitions.length} definitions available.`);
    if (sessionId !== undefined) {
      await this.resume(sessionId);
    }
  }

  /** Start a session of `definitionId` at its initial state. */
  async startSession(definitionId: string): Promise<void> {
    this.#clearError();
    try {
      const session = await this.#client.createSession(definitionId);
      await this.#open(session, []);
      this.#setStatus(`Session ${session.sessionId} started.`);
      this.#input.focus();
    } catch (error) {
      this.#fail("Could not start a session", error);
    }
  }

  /** Open a stored session and show its history. */
  async resume(sessionId: string): Promise<void> {
    this.#clearError();
    try {
      const { session, messages } = await this.#client.getSession(sessionId);
      await this.#open(session, messages);
      this.#setStatus(`Session ${session.sessionId} resumed (${messages.length} messages).`);
    } catch (error) {
      this.#fail(`Could not resume session ${sessionId}`, error);
    }
  }

  /** Run one turn, showing its events as they arrive. */
  async turn(action: TurnAction): Promise<void> {
    const session = this.#session;
    if (session === undefined || this.#live !== undefined) {
      return;
    }
    this.#clearError();
    const sessionId = session.sessionId;
    const turnId = newTurnId();
    const live = this.#show(turnId, true, action);
    savePendingTurn({ sessionId, turnId, action, sequence: 0n, text: "", decision: undefined });
    this.#setStatus("Waiting for the reply…");
    await this.#follow(sessionId, live, action, (signal) =>
      this.#events(sessionId, action, turnId, live, signal),
    );
  }

  /** Follow this tab's turn again after a reload, from the last event it showed. */
  async #reattach(pending: PendingTurn): Promise<void> {
    const { sessionId, turnId, action, sequence } = pending;
    const live = this.#show(turnId, true, action, pending);
    live.last = sequence;
    this.#setStatus("Reconnecting to the reply…");
    await this.#follow(sessionId, live, action, (signal) =>
      this.#client.watchTurn(sessionId, turnId, {
        afterSequence: sequence,
        signal,
        reattach: this.#reattachOptions(live),
      }),
    );
  }

  /** Show `turnId` streaming; `shown` is what an earlier page showed of it. */
  #show(
    turnId: string,
    own: boolean,
    action: TurnAction | undefined,
    shown?: { readonly text: string; readonly decision: PendingTurn["decision"] },
  ): LiveTurn {
    if (own) {
      this.#ownTurns.add(turnId);
      this.#editing = undefined;
    }
    // A call streamed again (an approved one, sent back to run) keeps its card in the history.
    const inHistory = (callId: string): boolean =>
      this.#messages.some((message) => message.toolCalls.some((call) => call.id === callId));
    const reply = new ReplyView(shown, inHistory);
    const live: LiveTurn = { turnId, own, action, reply, last: 0n };
    this.#live = live;
    this.#render();
    return live;
  }

  /** Show the events of this tab's turn until it ends, then the history as stored. */
  async #follow(
    sessionId: string,
    live: LiveTurn,
    action: TurnAction,
    open: (signal: AbortSignal) => AsyncIterable<TurnEvent>,
  ): Promise<void> {
    const controller = new AbortController();
    this.#running = controller;
    const reply = live.reply;
    let completed = false;
    let ended = false; // the turn is over, or never ran: forget it
    try {
      for await (const event of open(controller.signal)) {
        live.last = event.sequence;
        reply.note(undefined);
        reply.apply(event);
        this.#onEvent(event);
        completed ||= event.kind === "completed";
        ended ||= isTerminal(event);
        if (!ended) {
          const { text, decision } = reply.shown;
          const sequence = event.sequence;
          savePendingTurn({ sessionId, turnId: live.turnId, action, sequence, text, decision });
        }
      }
      ended = true; // a watch of a turn that had ended ends without a terminal event
    } catch (error) {
      if (this.#leaving) {
        return;
      }
      // A refusal with a reason is the server's answer (the turn is unknown, say); without
      // one the stream broke, and the turn may still run: a reload tries it again.
      ended =
        controller.signal.aborted || (error instanceof ChatError && error.reason !== undefined);
      if (controller.signal.aborted) {
        reply.end("stopped", "Stopped.");
        this.#setStatus("Stopped.");
      } else {
        reply.end("error", "The reply did not arrive.");
        this.#fail("The turn did not run", error);
      }
    }
    if (ended) {
      clearPendingTurn(live.turnId);
    }
    if (this.#running === controller) {
      this.#running = undefined;
    }
    if (this.#live === live) {
      this.#live = undefined;
      this.#stopping = false;
    }
    if (!completed && action.kind === "submit" && !this.#input.value) {
      this.#input.value = action.content; // nothing was committed: offer it again
    }
    await this.#reload();
    if (document.activeElement === document.body || document.activeElement === null) {
      this.#input.focus();
    }
  }

  /** Stop the turn shown streaming (this tab's or another's): CancelTurn. */
  stop(): void {
    const live = this.#live;
    const session = this.#session;
    if (live === undefined || session === undefined || this.#stopping) {
      return;
    }
    this.#stopping = true;
    this.#setBusy();
    this.#setStatus("Stopping…");
    const running = live.own ? this.#running : undefined;
    this.#client.cancelTurn(session.sessionId, live.turnId).then(
      (result) => {
        if (!result.cancelled && result.turn === undefined) {
          running?.abort(); // not running (yet): end the stream
        }
      },
      (error: unknown) => {
        if (running !== undefined) {
          running.abort(); // a server without CancelTurn: at least end the stream
        } else {
          this.#stopping = false;
          this.#setBusy();
          this.#fail("Could not stop the turn", error);
        }
      },
    );
  }

  /** Keep only the messages up to `messageId` (none when undefined); runs no turn. */
  async truncate(messageId: string | undefined): Promise<void> {
    const session = this.#session;
    if (session === undefined || this.#live !== undefined) {
      return;
    }
    this.#clearError();
    try {
      const { session: updated, messages } = await this.#client.truncate(
        session.sessionId,
        messageId,
      );
      this.#session = updated;
      this.#messages = [...messages];
      this.#render();
      void this.#desk.sync(updated.sessionId, this.#messages, false);
      this.#setStatus(`History truncated to ${messages.length} messages.`);
      this.#input.focus();
    } catch (error) {
      this.#fail("Could not truncate the history", error);
    }
  }

  #events(
    sessionId: string,
    action: TurnAction,
    turnId: string,
    live: LiveTurn,
    signal: AbortSignal,
  ): AsyncGenerator<TurnEvent> {
    const reattach = this.#reattachOptions(live);
    const options = {
      signal,
      turnId,
      onDisconnect: "continue",
      reattach,
      tools: PAGE_TOOLS,
    } as const;
    switch (action.kind) {
      case "submit":
        return this.#client.submit(sessionId, action.content, options);
      case "retry":
        return this.#client.retry(sessionId, action.messageId, options);
      case "edit":
        return this.#client.edit(sessionId, action.messageId, action.content, options);
      case "regenerate":
        return this.#client.regenerate(sessionId, action.messageId, options);
      case "toolResults":
        return this.#client.toolResults(sessionId, action.answer, options);
    }
  }

  /** Say so under the answer while its broken stream is followed again. */
  #reattachOptions(live: LiveTurn): { onReattach: (attempt: { attempt: number }) => void } {
    return {
      onReattach: ({ attempt }) => {
        live.reply.note(`Connection lost; reconnecting (attempt ${attempt})…`);
        this.#setStatus("Reconnecting to the reply…");
      },
    };
  }

  #onEvent(event: TurnEvent): void {
    const session = this.#session;
    if (event.kind === "completed" && session !== undefined) {
      this.#desk.expect(event.value.pendingToolCalls, true);
      session.snapshot = event.value.snapshot;
      session.cursor = event.value.cursor;
      this.#renderState();
      this.#setStatus("Reply complete.");
    } else if (event.kind === "failed" && event.value.code === "cancelled") {
      this.#setStatus("Stopped.");
    } else if (event.kind === "failed") {
      const { code, message, retryable } = event.value;
      this.#showError(
        `The turn failed (${code}): ${message}${retryable ? " Retrying may work." : ""}`,
      );
      this.#setStatus(`The turn failed: ${code}.`);
    } else if (event.kind === "delta") {
      this.#setStatus("Receiving the reply…");
    }
  }

  /** The history as it will look while the turn runs (the server's view follows it). */
  #optimistic(action: TurnAction, remote: boolean, tools: ShownTools): Element[] {
    const index = (id: string): number => {
      const found = this.#messages.findIndex((message) => message.id === id);
      return found < 0 ? this.#messages.length : found;
    };
    const items = (messages: readonly Message[]): Element[] =>
      messages.flatMap((message) => this.#messageItem(message, tools) ?? []);
    // The text of a message sent elsewhere arrives with the history once the turn ends.
    const pendingUser = (content: string): Element =>
      h(
        "li",
        { class: `message user pending${remote ? " remote" : ""}`, "data-role": "user" },
        h(
          "p",
          { class: "message-head" },
          h("span", { class: "role" }, ROLE_LABELS["user"]),
          remote && " ",
          remote && h("span", { class: "elsewhere" }, "in another window"),
        ),
        h("div", { class: "content" }, remote ? "…" : content),
      );
    switch (action.kind) {
      case "submit":
        return [...items(this.#messages), pendingUser(action.content)];
      case "retry":
        return items(this.#messages.slice(0, index(action.messageId) + 1));
      case "edit":
        return [
          ...items(this.#messages.slice(0, index(action.messageId))),
          pendingUser(action.content),
        ];
      case "regenerate":
        return items(this.#messages.slice(0, index(action.messageId)));
      case "toolResults":
        return items(this.#messages);
    }
  }

  async #open(session: Session, messages: readonly Message[]): Promise<void> {
    this.#definition =
      this.#definitions.find((definition) => definition.id === session.definitionId) ??
      (await this.#client.getDefinition(session.definitionId));
    this.#watch?.stop();
    if (this.#session?.sessionId !== session.sessionId) {
      this.#desk.reset();
    }
    if (this.#live?.own === false) {
      this.#live = undefined; // another session's turn
    }
    this.#session = session;
    this.#messages = [...messages];
    this.#editing = undefined;
    rememberSession(session.sessionId);
    const pending = loadPendingTurn(session.sessionId);
    // The calls the last answer waits on, before they show: they are the page's to run
    // when it opens the session on them (not when it reattaches to a turn that runs).
    await this.#desk.sync(session.sessionId, this.#messages, pending === undefined);
    if (this.#session?.sessionId !== session.sessionId) {
      return; // another session was opened meanwhile
    }
    this.#chat.hidden = false;
    this.#render();
    if (pending !== undefined) {
      void this.#reattach(pending); // marks the turn as this tab's before the watch starts
    }
    this.#watch = undefined;
    this.#watchWhileVisible();
  }

  /** Watch the open session while the page is visible. */
  #watchWhileVisible(): void {
    const session = this.#session;
    if (session === undefined) {
      return;
    }
    if (document.visibilityState === "hidden") {
      this.#watch?.stop();
      this.#watch = undefined;
      document.body.dataset["watch"] = "paused";
    } else if (this.#watch === undefined) {
      this.#watch = this.#watchSession(session);
    }
  }

  /** Follow the session live: turns started elsewhere, and changes to reload. */
  #watchSession(session: Session): SessionWatch {
    const sessionId = session.sessionId;
    const current = (): boolean => this.#session?.sessionId === sessionId;
    return new SessionWatch(this.#client, sessionId, session.cursor, {
      session: (changed, first) => {
        document.body.dataset["watch"] = "live";
        if (!current()) {
          return;
        }
        if (first && this.#live?.own === false) {
          // Watching again after a break: the turn shown may have ended unseen. If it still
          // runs, its events come again from the first the server keeps.
          this.#live = undefined;
          void this.#reload();
        } else if (this.#live === undefined && changed.cursor !== this.#session?.cursor) {
          // A turn's end reloads the history; otherwise reload when the stored session
          // moved (a truncation, a turn seen only by its end, changes missed meanwhile).
          void this.#reload();
        }
      },
      event: (event) => {
        if (current()) {
          this.#onWatchEvent(event);
        }
      },
      ended: (error) => {
        document.body.dataset["watch"] = "off";
        if (current() && error.code === Code.NotFound) {
          this.#fail("The session is no longer available", error);
        }
      },
    });
  }

  /** An event of a turn of the session: shown live unless this tab runs it. */
  #onWatchEvent(event: TurnEvent): void {
    if (this.#ownTurns.has(event.turnId)) {
      return;
    }
    let live = this.#live;
    if (live?.turnId !== event.turnId) {
      if (live?.own === true || isTerminal(event)) {
        // This tab's turn runs (the other one ended unseen), or only the end was seen.
        void this.#reload();
        return;
      }
      live = this.#show(event.turnId, false, remoteAction(event));
    }
    if (event.sequence <= live.last) {
      return; // a watch resumed after a break repeats what was shown
    }
    live.last = event.sequence;
    live.reply.apply(event);
    if (event.kind === "delta") {
      this.#setStatus("Receiving a reply to another window…");
    } else if (isTerminal(event)) {
      if (event.kind === "completed") {
        this.#desk.expect(event.value.pendingToolCalls, false);
      }
      this.#live = undefined;
      this.#stopping = false;
      this.#setStatus(
        event.kind === "completed" ? "Reply complete." : "A turn of another window ended.",
      );
      void this.#reload();
    }
  }

  /** Fetch the session again: the server's history is the one shown. */
  #reload(): Promise<void> {
    this.#reloads = this.#reloads.then(() => this.#fetchHistory());
    return this.#reloads;
  }

  async #fetchHistory(): Promise<void> {
    const session = this.#session;
    if (session === undefined) {
      return;
    }
    try {
      const { session: current, messages } = await this.#client.getSession(session.sessionId);
      if (this.#session?.sessionId !== current.sessionId) {
        return; // another session was opened meanwhile
      }
      this.#session = current;
      this.#messages = [...messages];
      void this.#desk.sync(current.sessionId, this.#messages, false);
    } catch (error) {
      this.#fail("Could not load the session", error);
    }
    this.#render();
  }

  #submitInput(): void {
    const content = this.#input.value;
    if (!content.trim() || this.#live !== undefined) {
      return;
    }
    this.#input.value = "";
    void this.turn({ kind: "submit", content });
  }

  #render(): void {
    const session = this.#session;
    if (session === undefined) {
      return;
    }
    this.#sessionId.textContent = session.sessionId;
    this.#sessionDefinition.textContent = `${session.definitionId} (revision ${session.definitionRevision})`;
    this.#renderState();
    const live = this.#live;
    const tools = this.#desk.shown(this.#messages);
    const items =
      live?.action === undefined
        ? this.#messages.flatMap((message) => this.#messageItem(message, tools) ?? [])
        : this.#optimistic(live.action, !live.own, tools);
    replaceChildren(this.#messageList, ...items, live?.reply.element);
    live?.reply.element.scrollIntoView({ block: "nearest" });
    this.#setBusy();
  }

  #renderState(): void {
    const snapshot = this.#session?.snapshot;
    const routes = this.#definition?.routes ?? [];
    this.#stateName.textContent = snapshot?.state ?? "";
    const actions = snapshot?.actions ?? [];
    replaceChildren(
      this.#actions,
      ...(actions.length
        ? actions.map((action) => h("li", { class: "action" }, action))
        : [h("li", { class: "none" }, "none")]),
    );
    const commands = snapshot === undefined ? [] : commandHints(routes, snapshot);
    replaceChildren(
      this.#commands,
      ...(commands.length
        ? commands.map((text) => {
            const button = h(
              "button",
              { type: "button", class: "command", "data-command": text },
              text,
            );
            button.addEventListener("click", () => void this.turn({ kind: "submit", content: text }));
            return button;
          })
        : [h("span", { class: "none" }, "none")]),
    );
    this.#setBusy();
  }

  /** The list item of `message`; none for a tool result its call's card shows. */
  #messageItem(message: Message, tools: ShownTools): HTMLLIElement | undefined {
    if (tools.folded(message)) {
      return undefined;
    }
    const role = ROLE_NAMES[message.role] ?? "unspecified";
    const origin = message.origin;
    const editing = this.#editing === message.id;
    const cards = tools.cards(message);
    return h(
      "li",
      { class: `message ${role}`, "data-role": role, "data-message-id": message.id },
      h(
        "p",
        { class: "message-head" },
        h("span", { class: "role" }, ROLE_LABELS[role] ?? role),
        origin && role === "assistant" && " ",
        origin && role === "assistant" && decisionMeta(origin),
      ),
      editing
        ? this.#editForm(message)
        : (message.content || cards.length === 0) &&
            h("div", { class: "content" }, message.content),
      cards.length > 0 && h("div", { class: "tool-calls" }, ...cards),
      !editing && this.#messageControls(message, role),
    );
  }

  #messageControls(message: Message, role: string): HTMLDivElement {
    const button = (label: string, name: string, run: () => void): HTMLButtonElement => {
      const element = h("button", { type: "button", class: "control", "data-control": name }, label);
      element.addEventListener("click", run);
      return element;
    };
    const controls: HTMLButtonElement[] = [];
    if (role === "user") {
      controls.push(
        button("Retry", "retry", () => void this.turn({ kind: "retry", messageId: message.id })),
        button("Edit", "edit", () => {
          this.#editing = message.id;
          this.#render();
          document.getElementById(`edit-${message.id}`)?.focus();
        }),
      );
    }
    if (role === "assistant") {
      controls.push(
        button(
          "Regenerate",
          "regenerate",
          () => void this.turn({ kind: "regenerate", messageId: message.id }),
        ),
      );
    }
    controls.push(button("Truncate after", "truncate", () => void this.truncate(message.id)));
    return h(
      "div",
      { class: "controls", role: "group", "aria-label": `${ROLE_LABELS[role] ?? role} message` },
      ...controls,
    );
  }

  #editForm(message: Message): HTMLFormElement {
    const id = `edit-${message.id}`;
    const text = h("textarea", { id, rows: 2 }, message.content);
    const cancel = h("button", { type: "button", "data-control": "cancel-edit" }, "Cancel");
    const form = h(
      "form",
      { class: "edit-form" },
      h("label", { for: id }, "Edit message"),
      text,
      h("button", { type: "submit", "data-control": "save-edit" }, "Save and send"),
      cancel,
    );
    const close = (): void => {
      this.#editing = undefined;
      this.#render();
    };
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        close();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (text.value.trim()) {
        void this.turn({ kind: "edit", messageId: message.id, content: text.value });
      }
    });
    return form;
  }

  #describeDefinition(): void {
    const definition = this.#definitions.find((d) => d.id === this.#definitionSelect.value);
    this.#definitionDescription.textContent = definition?.description ?? "";
  }

  /** Disable what cannot run while a turn streams (this tab's or another's). */
  #setBusy(): void {
    const busy = this.#live !== undefined;
    document.body.dataset["turn"] = busy ? "running" : "idle";
    this.#send.disabled = busy;
    this.#stop.disabled = !busy || this.#stopping;
    for (const element of document.querySelectorAll<HTMLButtonElement | HTMLInputElement>(
      "#setup button, button.command, button.control, .edit-form button, " +
        ".tool-approval button, .tool-approval input",
    )) {
      element.disabled = busy;
    }
  }

  #setStatus(text: string): void {
    this.#status.textContent = text;
  }

  #fail(what: string, error: unknown): void {
    this.#showError(`${what}: ${describeError(error)}`);
  }

  #showError(text: string): void {
    this.#error.textContent = text;
    this.#error.hidden = false;
  }

  #clearError(): void {
    this.#error.textContent = "";
    this.#error.hidden = true;
  }
}
