// The open session's tool calls: their cards, and the answers to the calls the last answer
// waits on. Calls waiting for a result are run here when this page claimed them: the page
// that sent the turn leaving them pending runs them (or the page that opens the session on
// them), not one that only watches. Calls waiting for approval ask the user. Once every
// pending call has its answer, they are sent together as one tool_results turn.
import {
  type ChatClient,
  type Message,
  Role,
  ToolWait,
  TurnOutcome,
} from "@agentskit/chat-client";
import { runPageTool } from "./page-tools.js";
import { toolCard, type ToolCardActions } from "./tool-card.js";
import { openCalls, storedResults } from "./tool-history.js";
import { type MadeCall, ToolLedger } from "./tool-ledger.js";
import { toolCallView } from "./tool-view.js";
import type { ToolAnswer } from "./turn-action.js";

/** What the desk asks of the page. */
export interface ToolDeskHost {
  /** Something a card shows changed: draw the history again. */
  changed(): void;
  /** Whether a turn runs (nothing is sent meanwhile). */
  busy(): boolean;
  /** Send the answers to the pending calls as a tool_results turn. */
  send(answer: ToolAnswer): void;
  /** A call to the service failed. */
  failed(what: string, error: unknown): void;
}

/** A call the last answer waits on. */
interface Pending {
  readonly call: MadeCall;
  readonly wait: ToolWait;
}

/** How the history shows its tool calls: cards under each answer, results folded in. */
export interface ShownTools {
  /** The cards of `message`'s calls (none for a message that made no call). */
  cards(message: Message): HTMLElement[];
  /** Whether `message` is a result its call's card shows. */
  folded(message: Message): boolean;
}

/** The tool calls of the open session. */
export class ToolDesk {
  readonly #client: ChatClient;
  readonly #host: ToolDeskHost;
  readonly #ledger = new ToolLedger();
  readonly #actions: ToolCardActions;
  #pending: readonly Pending[] = [];
  /** The pending calls last answered, so that one round is sent once. */
  #sent = "";
  /** Counts the syncs: an older one's answer is dropped. */
  #syncs = 0;

  constructor(client: ChatClient, host: ToolDeskHost) {
    this.#client = client;
    this.#host = host;
    this.#actions = {
      approve: (callId) => this.#decide(callId, true, ""),
      deny: (callId, reason) => this.#decide(callId, false, reason),
      draft: (callId, reason) => this.#ledger.setDraft(callId, reason),
      drafted: (callId) => this.#ledger.draft(callId),
    };
  }

  /** Another session is open: forget what this page knew of the last one's calls. */
  reset(): void {
    this.#syncs += 1;
    this.#ledger.clear();
    this.#pending = [];
    this.#sent = "";
  }

  /**
   * A turn completed waiting on `pending`: its cards say so before the history is read.
   * The calls are this page's to run when the turn was `own`, else the other page's.
   */
  expect(
    pending: readonly { readonly toolCallId: string; readonly wait: ToolWait }[],
    own: boolean,
  ): void {
    for (const { toolCallId, wait } of pending) {
      this.#ledger.expect(toolCallId, wait);
      this.#ledger.claim(toolCallId, own);
    }
  }

  /** How `messages` (the history shown) show their calls. */
  shown(messages: readonly Message[]): ShownTools {
    const results = storedResults(messages);
    const calls = new Set(messages.flatMap((message) => message.toolCalls.map((call) => call.id)));
    return {
      cards: (message) =>
        message.toolCalls.map((call) =>
          toolCard(toolCallView(this.#ledger.facts(call, results.get(call.id))), this.#actions),
        ),
      folded: (message) => message.role === Role.TOOL && calls.has(message.toolCallId),
    };
  }

  /**
   * Learn what the last answer of `messages` (the stored history) waits on, and run the
   * tools of the claimed calls waiting for a result; with `claim`, every call of that answer
   * is this page's (it opens the session). Sends the answers once every call has one.
   */
  async sync(sessionId: string, messages: readonly Message[], claim: boolean): Promise<void> {
    const sync = ++this.#syncs;
    const open = openCalls(messages);
    if (claim) {
      for (const call of open) {
        this.#ledger.claim(call.id, true);
      }
    }
    const waits = new Map<string, ToolWait>();
    if (open.length > 0) {
      try {
        // The newest turn is the one whose answer the calls wait on, if they still wait.
        const [last] = (await this.#client.listTurns(sessionId, { pageSize: 1 })).turns;
        if (last?.outcome === TurnOutcome.COMPLETED) {
          for (const pending of last.pendingToolCalls) {
            waits.set(pending.toolCallId, pending.wait);
          }
        }
      } catch (error) {
        this.#host.failed("Could not load the pending tool calls", error);
      }
    }
    if (sync !== this.#syncs) {
      return; // a newer history arrived meanwhile
    }
    this.#ledger.setWaits(waits);
    this.#pending = open.flatMap((call) => {
      const wait = waits.get(call.id);
      return wait === undefined ? [] : [{ call, wait }];
    });
    this.#runPageTools();
    this.#host.changed();
    this.#sendWhenAnswered();
  }

  /** Run the tools of the claimed calls that wait for a result (each call once). */
  #runPageTools(): void {
    for (const { call, wait } of this.#pending) {
      if (
        wait === ToolWait.RESULT &&
        this.#ledger.isClaimed(call.id) &&
        this.#ledger.result(call.id) === undefined &&
        !this.#ledger.isRunning(call.id)
      ) {
        this.#ledger.running(call.id);
        this.#ledger.setResult(call.id, runPageTool(call.name, call.arguments));
      }
    }
  }

  #decide(callId: string, approved: boolean, reason: string): void {
    const pending = this.#pending.find(({ call }) => call.id === callId);
    if (pending?.wait !== ToolWait.APPROVAL || this.#host.busy()) {
      return;
    }
    this.#ledger.decide(callId, { approved, reason: approved ? "" : reason });
    this.#host.changed();
    this.#sendWhenAnswered();
  }

  /** Send the answers of the pending calls once each has one (and once per round). */
  #sendWhenAnswered(): void {
    if (this.#pending.length === 0 || this.#host.busy()) {
      return;
    }
    const results: { toolCallId: string; content: string }[] = [];
    const approvals: { toolCallId: string; approved: boolean; reason: string }[] = [];
    for (const { call, wait } of this.#pending) {
      if (wait === ToolWait.APPROVAL) {
        const decision = this.#ledger.decision(call.id);
        if (decision === undefined) {
          return;
        }
        approvals.push({ toolCallId: call.id, ...decision });
      } else {
        const content = this.#ledger.result(call.id);
        if (content === undefined) {
          return;
        }
        results.push({ toolCallId: call.id, content });
      }
    }
    const round = this.#pending.map(({ call, wait }) => `${call.id}:${wait}`).join(" ");
    if (round === this.#sent) {
      return;
    }
    this.#sent = round;
    this.#host.send({ results, approvals });
  }
}
