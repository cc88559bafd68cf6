// Route hints: which routes a renderer may offer as buttons in the current snapshot.
//
// A route is eligible when its event is among the snapshot's allowed events and, when the
// route is restricted to some states, the current state is one of them: the rule the
// server applies before it tries a route's matcher. A route with a fixed `inputText` (a
// "command" or "exact" matcher) can then be drawn as a button that sends that text.

/** What eligibility needs of a snapshot; the contract's `Snapshot` fits. */
export interface SnapshotLike {
  readonly state: string;
  readonly allowedEvents: readonly string[];
}

/** What eligibility needs of a route; the contract's `RouteInfo` fits. */
export interface EligibleRoute {
  readonly event: string;
  /** States the route is restricted to; empty means every state allowing the event. */
  readonly states: readonly string[];
}

/** A route that may carry a fixed input to offer as a button. */
export interface OfferedRoute extends EligibleRoute {
  /** The input that fires the route; empty when no single text does. */
  readonly inputText: string;
}

/** The routes that may answer in `snapshot`, in their given order. */
export function eligibleRoutes<R extends EligibleRoute>(
  routes: Iterable<R>,
  snapshot: SnapshotLike,
): R[] {
  const allowed = new Set(snapshot.allowedEvents);
  return [...routes].filter(
    (route) =>
      allowed.has(route.event) &&
      (route.states.length === 0 || route.states.includes(snapshot.state)),
  );
}

/**
 * The inputs to offer as buttons in `snapshot`: the `inputText` of each eligible route that
 * has one, in route order, each text once.
 */
export function commandHints(routes: Iterable<OfferedRoute>, snapshot: SnapshotLike): string[] {
  const offered: string[] = [];
  for (const route of eligibleRoutes(routes, snapshot)) {
    if (route.inputText && !offered.includes(route.inputText)) {
      offered.push(route.inputText);
    }
  }
  return offered;
}
