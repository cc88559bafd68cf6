// What this page knows of the open session's tool calls beyond the stored history: what
// each pending call waits for, which calls are this page's to run, the decisions taken, the
// tools it runs and their results until the service stores them, and the reasons typed.
import type { ToolWait } from "@agentskit/chat-client";
import type { ToolCallFacts, ToolDecision } from "./tool-view.js";

/** A call as the answer made it: its id, tool and arguments (JSON text). */
export interface MadeCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

interface Local {
  wait?: ToolWait;
  claimed?: boolean;
  decision?: ToolDecision;
  running?: boolean;
  result?: string;
  draft?: string;
}

/** The page's own facts about tool calls, by call id. */
export class ToolLedger {
  readonly #calls = new Map<string, Local>();

  #local(callId: string): Local {
    let local = this.#calls.get(callId);
    if (local === undefined) {
      local = {};
      this.#calls.set(callId, local);
    }
    return local;
  }

  /** The calls the last answer waits on now, and for what; every other call waits on nothing. */
  setWaits(waits: ReadonlyMap<string, ToolWait>): void {
    for (const [callId, local] of this.#calls) {
      if (!waits.has(callId)) {
        delete local.wait;
      }
    }
    for (const [callId, wait] of waits) {
      this.#local(callId).wait = wait;
    }
  }

  /** `callId` waits for `wait` (until the next {@link setWaits}). */
  expect(callId: string, wait: ToolWait): void {
    this.#local(callId).wait = wait;
  }

  /** What `callId` waits for, if it waits. */
  wait(callId: string): ToolWait | undefined {
    return this.#calls.get(callId)?.wait;
  }

  /** Whether this page runs `callId`'s tool when it waits for a result (else another does). */
  claim(callId: string, claimed: boolean): void {
    this.#local(callId).claimed = claimed;
  }

  isClaimed(callId: string): boolean {
    return this.#calls.get(callId)?.claimed === true;
  }

  decide(callId: string, decision: ToolDecision): void {
    this.#local(callId).decision = decision;
  }

  decision(callId: string): ToolDecision | undefined {
    return this.#calls.get(callId)?.decision;
  }

  /** The page started running the tool of `callId`. */
  running(callId: string): void {
    this.#local(callId).running = true;
  }

  isRunning(callId: string): boolean {
    return this.#calls.get(callId)?.running === true;
  }

  /** The page's result of `callId`, kept until the history holds it. */
  setResult(callId: string, content: string): void {
    const local = this.#local(callId);
    local.running = false;
    local.result = content;
  }

  result(callId: string): string | undefined {
    return this.#calls.get(callId)?.result;
  }

  setDraft(callId: string, reason: string): void {
    this.#local(callId).draft = reason;
  }

  draft(callId: string): string {
    return this.#calls.get(callId)?.draft ?? "";
  }

  /** Forget every call (another session is open). */
  clear(): void {
    this.#calls.clear();
  }

  /** What the page knows of `call`, whose stored result is `stored` (if any). */
  facts(call: MadeCall, stored: string | undefined): ToolCallFacts {
    const local = this.#calls.get(call.id);
    return {
      id: call.id,
      name: call.name,
      arguments: call.arguments,
      writing: false,
      wait: stored === undefined ? local?.wait : undefined,
      decision: local?.decision,
      running: stored === undefined && local?.running === true,
      result: stored ?? local?.result,
    };
  }
}
