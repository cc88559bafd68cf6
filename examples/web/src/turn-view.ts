// How a turn's decision reads: its badge, its transition, whether it was replayed.
import { TurnKind } from "@agentskit/chat-client";

/** What both a streamed decision and a stored answer's origin tell about a turn. */
export interface DecisionLike {
  readonly kind: TurnKind;
  readonly routeId: string;
  readonly fromState: string;
  readonly toState: string;
  readonly replayed: boolean;
}

const KIND_NAMES: Readonly<Record<number, string>> = {
  [TurnKind.DETERMINISTIC]: "deterministic",
  [TurnKind.AGENTIC]: "agentic",
  [TurnKind.REPAIRED]: "repaired",
  [TurnKind.FALLBACK]: "fallback",
};

/** The kind's name: deterministic, agentic, repaired, fallback (or unspecified). */
export function kindName(kind: TurnKind): string {
  return KIND_NAMES[kind] ?? "unspecified";
}

/**
 * The badge of a turn: the route id of a route's answer, "model" for the model's. A
 * repaired or fallback route says so after its id.
 */
export function badgeText(decision: DecisionLike): string {
  if (decision.kind === TurnKind.AGENTIC) {
    return "model";
  }
  const route = decision.routeId || "route";
  if (decision.kind === TurnKind.REPAIRED || decision.kind === TurnKind.FALLBACK) {
    return `${route} (${kindName(decision.kind)})`;
  }
  return route;
}

/** The transition, "from → to" (the same state twice when nothing moved). */
export function transitionText(decision: DecisionLike): string {
  return `${decision.fromState} → ${decision.toState}`;
}

/** The decision's fields alone (a streamed decision carries protobuf bookkeeping too). */
export function plainDecision(decision: DecisionLike): DecisionLike {
  const { kind, routeId, fromState, toState, replayed } = decision;
  return { kind, routeId, fromState, toState, replayed };
}
