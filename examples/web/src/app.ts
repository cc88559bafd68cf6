// The renderer: pick a definition, start or resume a session, run turns and show them.
import {
  type ChatClient,
  ChatError,
  commandHints,
  type Definition,
  type Message,
  Role,
  type Session,
  type TurnEvent,
} from "@agentskit/chat-client";
import { rememberSession } from "./config.js";
import { byId, h, replaceChildren } from "./dom.js";
import { decisionMeta, ReplyView } from "./reply-view.js";

/** A turn the renderer can run on the current session. */
export type TurnAction =
  | { readonly kind: "submit"; readonly content: string }
  | { readonly kind: "retry"; readonly messageId: string }
  | { readonly kind: "edit"; readonly messageId: string; readonly content: string }
  | { readonly kind: "regenerate"; readonly messageId: string };

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
  #definitions: Definition[] = [];
  #definition: Definition | undefined;
  #session: Session | undefined;
  #messages: Message[] = [];
  #running: AbortController | undefined;
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
      if (event.key === "Escape" && this.#running !== undefined) {
        this.stop();
      }
    });
    this.#setBusy(false);
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
    if (session === undefined || this.#running !== undefined) {
      return;
    }
    this.#clearError();
    const controller = new AbortController();
    this.#running = controller;
    this.#editing = undefined;
    this.#setBusy(true);
    this.#setStatus("Waiting for the reply…");
    const reply = new ReplyView();
    this.#renderMessages(this.#optimistic(action), reply.element);
    let completed = false;
    try {
      for await (const event of this.#events(session.sessionId, action, controller.signal)) {
        reply.apply(event);
        this.#onEvent(event);
        completed ||= event.kind === "completed";
      }
    } catch (error) {
      if (controller.signal.aborted) {
        reply.end("stopped", "Stopped.");
        this.#setStatus("Stopped.");
      } else {
        reply.end("error", "The reply did not arrive.");
        this.#fail("The turn did not run", error);
      }
    } finally {
      this.#running = undefined;
      if (!completed && action.kind === "submit" && !this.#input.value) {
        this.#input.value = action.content; // nothing was committed: offer it again
      }
      await this.#reload();
      this.#setBusy(false);
      if (document.activeElement === document.body || document.activeElement === null) {
        this.#input.focus();
      }
    }
  }

  /** Abort the turn in flight; the server cancels it and frees the session. */
  stop(): void {
    this.#running?.abort();
  }

  /** Keep only the messages up to `messageId` (none when undefined); runs no turn. */
  async truncate(messageId: string | undefined): Promise<void> {
    const session = this.#session;
    if (session === undefined || this.#running !== undefined) {
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
      this.#setStatus(`History truncated to ${messages.length} messages.`);
      this.#input.focus();
    } catch (error) {
      this.#fail("Could not truncate the history", error);
    }
  }

  #events(sessionId: string, action: TurnAction, signal: AbortSignal): AsyncGenerator<TurnEvent> {
    const options = { signal };
    switch (action.kind) {
      case "submit":
        return this.#client.submit(sessionId, action.content, options);
      case "retry":
        return this.#client.retry(sessionId, action.messageId, options);
      case "edit":
        return this.#client.edit(sessionId, action.messageId, action.content, options);
      case "regenerate":
        return this.#client.regenerate(sessionId, action.messageId, options);
    }
  }

  #onEvent(event: TurnEvent): void {
    const session = this.#session;
    if (event.kind === "completed" && session !== undefined) {
      session.snapshot = event.value.snapshot;
      session.cursor = event.value.cursor;
      this.#renderState();
      this.#setStatus("Reply complete.");
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
  #optimistic(action: TurnAction): Element[] {
    const index = (id: string): number => {
      const found = this.#messages.findIndex((message) => message.id === id);
      return found < 0 ? this.#messages.length : found;
    };
    const items = (messages: readonly Message[]): Element[] =>
      messages.map((message) => this.#messageItem(message));
    const pendingUser = (content: string): Element =>
      h(
        "li",
        { class: "message user pending", "data-role": "user" },
        h("p", { class: "message-head" }, h("span", { class: "role" }, ROLE_LABELS["user"])),
        h("div", { class: "content" }, content),
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
    }
  }

  async #open(session: Session, messages: readonly Message[]): Promise<void> {
    this.#definition =
      this.#definitions.find((definition) => definition.id === session.definitionId) ??
      (await this.#client.getDefinition(session.definitionId));
    this.#session = session;
    this.#messages = [...messages];
    this.#editing = undefined;
    rememberSession(session.sessionId);
    this.#chat.hidden = false;
    this.#render();
  }

  /** Fetch the session again: the server's history is the one shown. */
  async #reload(): Promise<void> {
    const session = this.#session;
    if (session === undefined) {
      return;
    }
    try {
      const { session: current, messages } = await this.#client.getSession(session.sessionId);
      this.#session = current;
      this.#messages = [...messages];
    } catch (error) {
      this.#fail("Could not load the session", error);
    }
    this.#render();
  }

  #submitInput(): void {
    const content = this.#input.value;
    if (!content.trim() || this.#running !== undefined) {
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
    this.#renderMessages(this.#messages.map((message) => this.#messageItem(message)));
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
    this.#setBusy(this.#running !== undefined);
  }

  #renderMessages(items: readonly Element[], reply?: Element): void {
    replaceChildren(this.#messageList, ...items, reply);
    reply?.scrollIntoView({ block: "nearest" });
    this.#setBusy(this.#running !== undefined);
  }

  #messageItem(message: Message): HTMLLIElement {
    const role = ROLE_NAMES[message.role] ?? "unspecified";
    const origin = message.origin;
    const editing = this.#editing === message.id;
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
      editing ? this.#editForm(message) : h("div", { class: "content" }, message.content),
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

  #setBusy(busy: boolean): void {
    document.body.dataset["turn"] = busy ? "running" : "idle";
    this.#send.disabled = busy;
    this.#stop.disabled = !busy;
    for (const element of document.querySelectorAll<HTMLButtonElement>(
      "#setup button, button.command, button.control, .edit-form button",
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
