// The turn this tab is running, kept in sessionStorage so that a reload in the middle of the
// answer reattaches to it (the turn runs on without its stream) instead of losing it.
import { isTurnAction, type TurnAction } from "./turn-action.js";
import type { DecisionLike } from "./turn-view.js";

const KEY = "agentskit-chat.running-turn";

/** A running turn of this tab and what it has shown so far. */
export interface PendingTurn {
  readonly sessionId: string;
  readonly turnId: string;
  /** What the turn does: how the history reads while it runs, and the text to offer again. */
  readonly action: TurnAction;
  /** The sequence of the last event shown; a reattach continues after it. */
  readonly sequence: bigint;
  /** The answer's text shown so far. */
  readonly text: string;
  /** The turn's decision, once shown. */
  readonly decision: DecisionLike | undefined;
}

interface Stored {
  sessionId: string;
  turnId: string;
  action: TurnAction;
  sequence: string;
  text: string;
  decision?: DecisionLike | undefined;
}

/** Remember `turn` for this tab (nothing when the browser refuses storage). */
export function savePendingTurn(turn: PendingTurn): void {
  const stored: Stored = {
    sessionId: turn.sessionId,
    turnId: turn.turnId,
    action: turn.action,
    sequence: turn.sequence.toString(),
    text: turn.text,
    decision: turn.decision,
  };
  try {
    sessionStorage.setItem(KEY, JSON.stringify(stored));
  } catch {
    // Storage disabled or full: a reload then simply shows the history.
  }
}

/** The running turn of `sessionId` this tab remembers, if any. */
export function loadPendingTurn(sessionId: string): PendingTurn | undefined {
  let raw: string | null;
  try {
    raw = sessionStorage.getItem(KEY);
  } catch {
    return undefined;
  }
  if (raw === null) {
    return undefined;
  }
  const turn = parse(raw);
  if (turn === undefined) {
    clearPendingTurn();
    return undefined;
  }
  return turn.sessionId === sessionId ? turn : undefined;
}

/** Forget the remembered turn (only `turnId`'s when given). */
export function clearPendingTurn(turnId?: string): void {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (raw === null || (turnId !== undefined && parse(raw)?.turnId !== turnId)) {
      return;
    }
    sessionStorage.removeItem(KEY);
  } catch {
    // Nothing stored then.
  }
}

function parse(raw: string): PendingTurn | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) {
    return undefined;
  }
  const stored = value as Partial<Record<keyof Stored, unknown>>;
  if (
    typeof stored.sessionId !== "string" ||
    typeof stored.turnId !== "string" ||
    typeof stored.sequence !== "string" ||
    !/^\d{1,20}$/.test(stored.sequence) ||
    typeof stored.text !== "string" ||
    !isTurnAction(stored.action)
  ) {
    return undefined;
  }
  return {
    sessionId: stored.sessionId,
    turnId: stored.turnId,
    action: stored.action,
    sequence: BigInt(stored.sequence),
    text: stored.text,
    decision: isDecision(stored.decision) ? stored.decision : undefined,
  };
}

function isDecision(value: unknown): value is DecisionLike {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const decision = value as Record<string, unknown>;
  return (
    typeof decision["kind"] === "number" &&
    typeof decision["routeId"] === "string" &&
    typeof decision["fromState"] === "string" &&
    typeof decision["toState"] === "string" &&
    typeof decision["replayed"] === "boolean"
  );
}
