// The answer being streamed: its badges when the decision arrives, its text delta by delta,
// and a card for each tool call it makes.
import type { TurnEvent } from "@agentskit/chat-client";
import { h, replaceChildren } from "./dom.js";
import { LiveToolCalls } from "./live-tool-calls.js";
import {
  badgeText,
  type DecisionLike,
  kindName,
  plainDecision,
  transitionText,
} from "./turn-view.js";

/** How a streamed answer ended. */
export type ReplyOutcome = "completed" | "failed" | "stopped" | "error";

/** The badges of a turn: kind/route, from → to, and "replayed" when it was. */
export function decisionMeta(decision: DecisionLike): HTMLSpanElement {
  const kind = kindName(decision.kind);
  return h(
    "span",
    { class: "turn-meta" },
    h(
      "span",
      { class: `badge badge-${kind}`, "data-badge": "route", title: `${kind} turn` },
      badgeText(decision),
    ),
    " ",
    h(
      "span",
      { class: "transition", "data-badge": "transition", title: "state before → after" },
      transitionText(decision),
    ),
    decision.replayed && " ",
    decision.replayed &&
      h(
        "span",
        { class: "badge badge-replayed", "data-badge": "replayed", title: "recorded answer" },
        "replayed",
      ),
  );
}

/** What an answer showed before the page was reloaded. */
export interface ShownReply {
  readonly text: string;
  readonly decision: DecisionLike | undefined;
}

/** The list item of an answer while it streams. */
export class ReplyView {
  readonly element: HTMLLIElement;
  readonly #meta: HTMLSpanElement;
  readonly #content: HTMLDivElement;
  readonly #note: HTMLParagraphElement;
  readonly #tools: LiveToolCalls;
  #text = "";
  #decision: DecisionLike | undefined;

  /**
   * A new answer, or one that goes on from what `shown` says it showed. Its calls show as
   * cards, but for those `shownElsewhere` (the history's cards already show them).
   */
  constructor(shown?: ShownReply, shownElsewhere: (callId: string) => boolean = () => false) {
    this.#meta = h("span", { class: "turn-meta-slot" });
    this.#content = h("div", {
      class: "content",
      id: "streaming-reply",
      "aria-live": "polite",
      "aria-busy": "true",
      "aria-label": "Reply being written",
    });
    this.#note = h("p", { class: "reply-note", hidden: true });
    this.#tools = new LiveToolCalls(shownElsewhere);
    this.element = h(
      "li",
      { class: "message assistant streaming", "data-role": "assistant", "data-streaming": "true" },
      h("p", { class: "message-head" }, h("span", { class: "role" }, "Assistant"), " ", this.#meta),
      this.#content,
      this.#tools.element,
      this.#note,
    );
    if (shown !== undefined) {
      this.#showText(shown.text);
      if (shown.decision !== undefined) {
        this.#showDecision(shown.decision);
      }
    }
  }

  /** The text shown so far and the decision, once known. */
  get shown(): ShownReply {
    return { text: this.#text, decision: this.#decision };
  }

  /** Show what one event of the turn says. */
  apply(event: TurnEvent): void {
    switch (event.kind) {
      case "started":
        if (event.value.duplicate) {
          this.#showText(""); // the recorded outcome follows: it replaces what was shown
          this.#tools.clear();
        }
        break;
      case "decision":
        this.#showDecision(event.value);
        break;
      case "delta":
        this.#showText(this.#text + event.value.text);
        break;
      case "completed":
        this.#content.textContent = event.value.content;
        this.end("completed");
        break;
      case "failed":
        if (event.value.code === "cancelled") {
          this.end("stopped", "Stopped.");
        } else {
          this.end("failed", `The turn failed (${event.value.code}): ${event.value.message}`);
        }
        break;
      default:
        this.#tools.apply(event);
    }
  }

  /** Say something about the answer under it (reconnecting, say); nothing when undefined. */
  note(text: string | undefined): void {
    this.#note.textContent = text ?? "";
    this.#note.hidden = text === undefined;
  }

  #showText(text: string): void {
    this.#text = text;
    this.#content.textContent = text;
  }

  #showDecision(decision: DecisionLike): void {
    this.#decision = plainDecision(decision);
    replaceChildren(this.#meta, decisionMeta(decision));
  }

  /** The stream is over; `note` says why when it did not complete. */
  end(outcome: ReplyOutcome, note?: string): void {
    this.element.dataset["streaming"] = "false";
    this.element.dataset["outcome"] = outcome;
    this.#content.setAttribute("aria-busy", "false");
    if (note !== undefined) {
      this.#note.textContent = note;
      this.#note.hidden = false;
    }
  }
}
