// The tool calls of an answer while it streams: each one's card from its first event, its
// arguments as they are written, and what it waits for once they are complete.
import type { ToolWait, TurnEvent } from "@agentskit/chat-client";
import { h, replaceChildren } from "./dom.js";
import { toolCard } from "./tool-card.js";
import { toolCallView } from "./tool-view.js";

interface Streamed {
  readonly name: string;
  arguments: string;
  writing: boolean;
  wait: ToolWait | undefined;
}

/** The cards of the calls a streaming answer makes, in the order they started. */
export class LiveToolCalls {
  readonly element = h("div", { class: "tool-calls", hidden: true });
  readonly #calls = new Map<string, Streamed>();
  readonly #shownElsewhere: (callId: string) => boolean;

  /** Calls `shownElsewhere` says another card shows (one streamed again) are left out. */
  constructor(shownElsewhere: (callId: string) => boolean) {
    this.#shownElsewhere = shownElsewhere;
  }

  /** Show what a tool event says (other events change nothing). */
  apply(event: TurnEvent): void {
    switch (event.kind) {
      case "toolCallStarted": {
        const { toolCallId, name } = event.value;
        if (this.#shownElsewhere(toolCallId)) {
          return;
        }
        this.#calls.set(toolCallId, { name, arguments: "", writing: true, wait: undefined });
        break;
      }
      case "toolCallDelta": {
        const call = this.#calls.get(event.value.toolCallId);
        if (call !== undefined) {
          call.arguments += event.value.argumentsDelta;
        }
        break;
      }
      case "toolCallEnded": {
        const call = this.#calls.get(event.value.toolCallId);
        if (call !== undefined) {
          call.arguments = event.value.arguments;
          call.writing = false;
          call.wait = event.value.wait;
        }
        break;
      }
      default:
        return;
    }
    this.#render();
  }

  /** Forget the calls shown (a repeated turn streams its recorded calls again). */
  clear(): void {
    this.#calls.clear();
    this.#render();
  }

  #render(): void {
    const cards = [...this.#calls].map(([id, call]) =>
      toolCard(
        toolCallView({
          id,
          name: call.name,
          arguments: call.arguments,
          writing: call.writing,
          wait: call.wait,
          decision: undefined,
          running: false,
          result: undefined,
        }),
      ),
    );
    replaceChildren(this.element, ...cards);
    this.element.hidden = cards.length === 0;
  }
}
