// The hosted definitions, from the service's ListDefinitions (Connect's JSON encoding), and
// the controls a definition offers in a state.
import { authHeaders, type Config } from "./config.js";

export interface StateInfo {
  readonly name: string;
  readonly events: readonly string[];
  readonly actions: readonly string[];
}

export interface RouteInfo {
  readonly id: string;
  readonly event: string;
  readonly states: readonly string[];
  /** The text that fires the route ("command" and "exact" matchers); empty otherwise. */
  readonly inputText: string;
}

export interface Definition {
  readonly id: string;
  readonly description: string;
  readonly initialState: string;
  readonly states: readonly StateInfo[];
  readonly routes: readonly RouteInfo[];
}

/** What the page draws as the conversation's controls. */
export interface Snapshot {
  readonly state: string;
  readonly allowedEvents: readonly string[];
  readonly actions: readonly string[];
}

type Json = Record<string, unknown>;

const record = (value: unknown): Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : {};
const text = (value: unknown): string => (typeof value === "string" ? value : "");
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const texts = (value: unknown): string[] => list(value).map(text).filter(Boolean);

function definition(value: unknown): Definition {
  const body = record(value);
  return {
    id: text(body.id),
    description: text(body.description),
    initialState: text(body.initialState),
    states: list(body.states).map((state) => {
      const info = record(state);
      return {
        name: text(info.name),
        events: list(info.transitions).map((transition) => text(record(transition).event)),
        actions: texts(info.actions),
      };
    }),
    routes: list(body.routes).map((route) => {
      const info = record(route);
      return {
        id: text(info.id),
        event: text(info.event),
        states: texts(info.states),
        inputText: text(info.inputText),
      };
    }),
  };
}

/** Every definition the service hosts, ordered by id. */
export async function listDefinitions(config: Config, signal: AbortSignal): Promise<Definition[]> {
  const response = await fetch(`${config.serverUrl}/agentskit.chat.v1.ChatService/ListDefinitions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...authHeaders(config) },
    body: "{}",
    signal,
  });
  if (!response.ok) {
    const code = text(record(await response.json().catch(() => ({}))).code);
    throw new Error(`listing the definitions failed: HTTP ${response.status}${code ? ` (${code})` : ""}`);
  }
  return list(record(await response.json()).definitions).map(definition);
}

/** The snapshot of `definition` in `state`, from its declaration. */
export function snapshotOf(definition: Definition, state: string): Snapshot {
  const info = definition.states.find((candidate) => candidate.name === state);
  return { state, allowedEvents: info?.events ?? [], actions: info?.actions ?? [] };
}

/**
 * The inputs to offer as buttons in `snapshot`: the fixed input of each route whose event
 * the state allows (and, for a route restricted to some states, in one of them), once each.
 */
export function commandButtons(definition: Definition, snapshot: Snapshot): string[] {
  const allowed = new Set(snapshot.allowedEvents);
  const offered: string[] = [];
  for (const route of definition.routes) {
    const eligible =
      allowed.has(route.event) && (route.states.length === 0 || route.states.includes(snapshot.state));
    if (eligible && route.inputText && !offered.includes(route.inputText)) {
      offered.push(route.inputText);
    }
  }
  return offered;
}
