// Runs one scenario of the conformance corpus through the TypeScript client.
import { create } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import {
  ChatClient,
  type DisconnectModeName,
  type MessageInput,
  type RoleName,
  type ToolApprovalInput,
  type ToolDeclarationInput,
  type ToolResultInput,
  type TurnEvent,
} from "@agentskit/chat-client";
import {
  CancelTurnResponseSchema,
  DefinitionSchema,
  GetSessionResponseSchema,
  ListDefinitionsResponseSchema,
  ListTurnsResponseSchema,
  SessionSchema,
  TruncateHistoryResponseSchema,
  TurnRecordSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import type { Scenario } from "./corpus.js";
import { type Json, lookup, match, show } from "./matching.js";
import {
  errorObservation,
  json,
  type Observation,
  SessionObservation,
  type StreamObserver,
  TurnObservation,
} from "./observations.js";

export const INVALID_TOKEN = "conformance-invalid-token";
const EVENTUALLY_MS = 5_000;
/** A string replaced by a captured value; any other string, `$5` included, is literal. */
const CAPTURED = /^\$[A-Za-z_][A-Za-z0-9_]*$/;
const STEP_OPTIONS = new Set(["expect", "capture", "token", "deadline_ms", "eventually"]);

type Args = { [key: string]: Json };

/** A step whose observation does not match its expectation, or a malformed scenario. */
export class ScenarioError extends Error {
  override readonly name = "ScenarioError";
}

interface Background {
  readonly done: Promise<void>;
  readonly abort: AbortController;
  readonly stream: { error: Observation | undefined; readonly observation: Observation };
  readonly expect: unknown;
}

/** The tokens of a run: the language's tenant, and its rate-limited tenant. */
export interface Tokens {
  readonly tenant: string;
  readonly limited: string;
}

/** Runs one scenario's steps in order with one language's tokens. */
export class Runner {
  readonly #scenario: Scenario;
  readonly #clients: ReadonlyMap<string, ChatClient>;
  readonly #values = new Map<string, string>();
  readonly #background = new Map<string, Background>();

  constructor(transport: Transport, tokens: Tokens, scenario: Scenario) {
    this.#scenario = scenario;
    this.#clients = new Map([
      ["", new ChatClient(transport, { token: tokens.tenant || undefined })],
      ["limited", new ChatClient(transport, { token: tokens.limited || undefined })],
      ["none", new ChatClient(transport)],
      ["invalid", new ChatClient(transport, { token: INVALID_TOKEN })],
    ]);
  }

  /** Every step in order; ScenarioError at the first that does not match. */
  async run(): Promise<void> {
    const steps = this.#scenario.body["steps"];
    if (!Array.isArray(steps)) {
      throw new ScenarioError("a scenario needs a list of steps");
    }
    try {
      for (const [index, step] of steps.entries()) {
        await this.#step(index, step as Args);
      }
    } finally {
      for (const background of this.#background.values()) {
        background.abort.abort();
        await background.done;
      }
    }
  }

  async #step(index: number, step: Args): Promise<void> {
    const operations = Object.keys(step).filter((key) => !STEP_OPTIONS.has(key));
    const [operation] = operations;
    if (operation === undefined || operations.length !== 1) {
      throw new ScenarioError(
        `step ${index + 1}: exactly one operation, got ${operations.join(", ")}`,
      );
    }
    const args = this.#substitute(step[operation] ?? null);
    const deadline = Date.now() + EVENTUALLY_MS;
    let observation: Observation | undefined;
    let problems: string[];
    for (;;) {
      observation = await this.#observe(operation, args, step);
      problems = check(this.#expected(step["expect"]), observation);
      if (problems.length === 0 || step["eventually"] !== true || Date.now() > deadline) {
        break;
      }
      await sleep(100);
    }
    if (problems.length > 0) {
      const observed = show(observation);
      throw new ScenarioError(
        `step ${index + 1} (${operation}): ${problems.join("; ")}\nobserved: ${observed}`,
      );
    }
    if (observation === undefined && step["capture"] !== undefined) {
      throw new ScenarioError(`step ${index + 1}: a background step takes no capture`);
    }
    const observed = observation ?? {};
    if (operation === "create_session" && isArgs(args) && typeof args["as"] === "string") {
      this.#capture(index, args["as"], observed, "session.sessionId");
    }
    for (const [name, path] of Object.entries(asArgs(step["capture"] ?? {}))) {
      this.#capture(index, name, observed, String(path));
    }
  }

  #capture(index: number, name: string, observed: Observation, path: string): void {
    const value = lookup(observed, path);
    if (value === undefined) {
      throw new ScenarioError(`step ${index + 1}: nothing at ${path} to capture`);
    }
    this.#values.set(name, value);
  }

  /** An `expect`, its `$name` strings replaced by the captured values. */
  #expected(expect: unknown): Json {
    return expect === undefined ? {} : this.#substitute(expect as Json);
  }

  #substitute(value: Json): Json {
    if (typeof value === "string" && CAPTURED.test(value)) {
      const found = this.#values.get(value.slice(1));
      if (found === undefined) {
        throw new ScenarioError(`${value} was never captured`);
      }
      return found;
    }
    if (Array.isArray(value)) {
      return value.map((item) => this.#substitute(item));
    }
    if (isArgs(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.#substitute(v)]));
    }
    return value;
  }

  /** The step's observation; undefined for a stream started in the background. */
  async #observe(operation: string, args: Json, step: Args): Promise<Observation | undefined> {
    const token = step["token"];
    const client = this.#clients.get(typeof token === "string" ? token : "");
    if (client === undefined) {
      throw new ScenarioError(`unknown token ${String(token)}`);
    }
    const timeoutMs = optionalInteger(step, "deadline_ms");
    switch (operation) {
      case "ended": {
        const background = this.#background.get(String(args));
        if (background === undefined) {
          throw new ScenarioError(`no background stream named ${String(args)}`);
        }
        await background.done;
        return {};
      }
      case "await":
      case "cancel":
        return this.#finish(String(args), operation === "cancel");
      case "stream_turn": {
        const turn = asArgs(args);
        return this.#read(turn, step["expect"], new TurnObservation(), (signal) =>
          this.#events(client, turn, { timeoutMs, signal }),
        );
      }
      case "watch_turn": {
        const watch = asArgs(args);
        const after = optionalInteger(watch, "after_sequence") ?? 0;
        return this.#read(watch, step["expect"], new TurnObservation(BigInt(after)), (signal) =>
          client.watchTurn(text(watch, "session"), text(watch, "turn_id"), {
            afterSequence: after,
            reattach: false,
            timeoutMs,
            signal,
          }),
        );
      }
      case "watch_session": {
        const watch = asArgs(args);
        const observer = new SessionObservation(text(watch, "until_turn"));
        return this.#read(watch, step["expect"], observer, (signal) =>
          client.watchSession(text(watch, "session"), {
            afterCursor: optionalInteger(watch, "after_cursor"),
            timeoutMs,
            signal,
          }),
        );
      }
      default:
        try {
          return await this.#unary(client, operation, asArgs(args ?? {}), timeoutMs);
        } catch (error) {
          if (error instanceof ScenarioError) throw error;
          return { error: errorObservation(error) };
        }
    }
  }

  async #unary(
    client: ChatClient,
    operation: string,
    args: Args,
    timeoutMs: number | undefined,
  ): Promise<Observation> {
    const call = { timeoutMs };
    switch (operation) {
      case "list_definitions": {
        const definitions = await client.listDefinitions(call);
        return json(
          ListDefinitionsResponseSchema,
          create(ListDefinitionsResponseSchema, { definitions }),
        );
      }
      case "get_definition": {
        const definition = await client.getDefinition(text(args, "definition_id"), {
          ...call,
          revision: optionalInteger(args, "revision"),
        });
        return { definition: json(DefinitionSchema, definition) };
      }
      case "create_session": {
        const definitionId =
          optionalText(args, "definition_id") ?? String(this.#scenario.body["definition"] ?? "");
        const session = await client.createSession(definitionId, {
          ...call,
          sessionId: optionalText(args, "session_id"),
          historyMode: args["history_mode"] === "client" ? "client" : "server",
          revision: optionalInteger(args, "definition_revision"),
        });
        return { session: json(SessionSchema, session) };
      }
      case "get_session": {
        const history = await client.getSession(text(args, "session"), call);
        return json(
          GetSessionResponseSchema,
          create(GetSessionResponseSchema, {
            session: history.session,
            messages: [...history.messages],
          }),
        );
      }
      case "delete_session":
        await client.deleteSession(text(args, "session"), {
          ...call,
          expectedCursor: optionalInteger(args, "expected_cursor"),
        });
        return {};
      case "truncate_history": {
        const history = await client.truncate(
          text(args, "session"),
          optionalText(args, "last_kept_message_id"),
          {
            ...call,
            expectedCursor: optionalInteger(args, "expected_cursor"),
          },
        );
        return json(
          TruncateHistoryResponseSchema,
          create(TruncateHistoryResponseSchema, {
            session: history.session,
            messages: [...history.messages],
          }),
        );
      }
      case "cancel_turn": {
        const outcome = await client.cancelTurn(
          text(args, "session"),
          text(args, "turn_id"),
          call,
        );
        return json(CancelTurnResponseSchema, create(CancelTurnResponseSchema, outcome));
      }
      case "get_turn": {
        const turn = await client.getTurn(text(args, "session"), text(args, "turn_id"), call);
        return { turn: json(TurnRecordSchema, turn) };
      }
      case "list_turns": {
        const page = await client.listTurns(text(args, "session"), {
          ...call,
          pageSize: optionalInteger(args, "page_size"),
          pageToken: optionalText(args, "page_token"),
        });
        const response = create(ListTurnsResponseSchema, {
          turns: [...page.turns],
          nextPageToken: page.nextPageToken ?? "",
        });
        return json(ListTurnsResponseSchema, response);
      }
      default:
        throw new ScenarioError(`unknown operation ${operation}`);
    }
  }

  /** The turn through the client's shortcut for its operation. */
  #events(
    client: ChatClient,
    args: Args,
    options: { timeoutMs: number | undefined; signal: AbortSignal },
  ): AsyncIterable<TurnEvent> {
    const session = text(args, "session");
    const turn = {
      ...options,
      turnId: optionalText(args, "turn_id"),
      expectedCursor: optionalInteger(args, "expected_cursor"),
      onDisconnect: disconnectMode(args),
      tools: optionalList(args, "tools")?.map(toolDeclaration),
      toolChoice: optionalText(args, "tool_choice"),
      parallelToolCalls: optionalBoolean(args, "parallel_tool_calls"),
    };
    if ("submit" in args) {
      const submit = asArgs(args["submit"]);
      return client.submit(session, text(submit, "content"), {
        ...turn,
        messageId: optionalText(submit, "message_id"),
      });
    }
    if ("retry" in args) {
      return client.retry(session, optionalText(asArgs(args["retry"] ?? {}), "message_id"), turn);
    }
    if ("edit" in args) {
      const edit = asArgs(args["edit"]);
      return client.edit(session, text(edit, "message_id"), text(edit, "content"), turn);
    }
    if ("regenerate" in args) {
      return client.regenerate(
        session,
        optionalText(asArgs(args["regenerate"] ?? {}), "message_id"),
        turn,
      );
    }
    if ("dispatch" in args) {
      const dispatch = asArgs(args["dispatch"]);
      const messages = (optionalList(dispatch, "messages") ?? []).map(messageInput);
      const approvals = optionalList(dispatch, "approvals")?.map(approvalInput);
      return client.dispatch(session, messages, { ...turn, approvals });
    }
    if ("tool_results" in args) {
      const answers = asArgs(args["tool_results"] ?? {});
      const results = optionalList(answers, "results")?.map(resultInput);
      const approvals = optionalList(answers, "approvals")?.map(approvalInput);
      return client.toolResults(session, { results, approvals }, turn);
    }
    throw new ScenarioError(
      "stream_turn needs submit, retry, edit, regenerate, dispatch or tool_results",
    );
  }

  /**
   * Read a stream into `observer`: to its end, or until the observer has what it waits
   * for (then the stream is closed). A background step moves on once the observer is
   * ready (a turn's first event, a watch's first session) or the stream ended.
   */
  async #read<Item>(
    args: Args,
    expect: unknown,
    observer: StreamObserver<Item>,
    items: (signal: AbortSignal) => AsyncIterable<Item>,
  ): Promise<Observation | undefined> {
    const abort = new AbortController();
    let readied: () => void = () => {};
    const ready = new Promise<void>((resolve) => (readied = resolve));
    const stream = items(abort.signal); // a malformed step throws here, before any call
    const done = (async () => {
      try {
        for await (const item of stream) {
          const complete = observer.add(item);
          if (observer.ready) readied();
          if (complete) break;
        }
      } catch (error) {
        observer.error = errorObservation(error);
      }
    })();
    if (typeof args["background"] !== "string") {
      await done;
      return observer.observation;
    }
    await Promise.race([ready, done]);
    this.#background.set(args["background"], { done, abort, stream: observer, expect });
    return undefined;
  }

  async #finish(name: string, cancel: boolean): Promise<Observation> {
    const background = this.#background.get(name);
    if (background === undefined) {
      throw new ScenarioError(`no background stream named ${name}`);
    }
    this.#background.delete(name);
    if (cancel) {
      background.abort.abort();
    }
    await background.done;
    if (cancel && background.stream.error?.["code"] === "CANCELLED") {
      background.stream.error = undefined; // the cancellation itself; an earlier failure stays
    }
    const observation = background.stream.observation;
    const problems = check(this.#expected(background.expect), observation);
    if (problems.length > 0) {
      throw new ScenarioError(
        `background ${name}: ${problems.join("; ")}\nobserved: ${show(observation)}`,
      );
    }
    return observation;
  }
}

/** The step's problems: an unexpected error, a missing one, or a mismatch. */
function check(expect: unknown, observation: Observation | undefined): string[] {
  if (observation === undefined) {
    return []; // a background stream: checked when it ends
  }
  const expected = isArgs(expect) ? expect : {};
  if ("error" in observation && !("error" in expected)) {
    return [`unexpected error ${show(observation["error"])}`];
  }
  if ("error" in expected && !("error" in observation)) {
    return [`expected error ${show(expected["error"])}, but the call succeeded`];
  }
  return match(expected, observation);
}

function isArgs(value: unknown): value is Args {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asArgs(value: unknown): Args {
  if (!isArgs(value)) {
    throw new ScenarioError(`expected a mapping of arguments, got ${show(value)}`);
  }
  return value;
}

function text(args: Args, key: string): string {
  const value = args[key];
  if (typeof value !== "string") {
    throw new ScenarioError(`argument ${key} must be a string, got ${show(value)}`);
  }
  return value;
}

function optionalText(args: Args, key: string): string | undefined {
  return args[key] === undefined || args[key] === null ? undefined : text(args, key);
}

/** An integer argument: an integer, or a decimal string such as a captured cursor. */
function optionalInteger(args: Args, key: string): number | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === "bigint" && Number.isSafeInteger(Number(value))) return Number(value);
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  if (typeof value === "string" && /^-?\d+$/.test(value) && Number.isSafeInteger(Number(value))) {
    return Number(value);
  }
  throw new ScenarioError(
    `argument ${key} must be an integer or a decimal string, got ${show(value)}`,
  );
}

function optionalBoolean(args: Args, key: string): boolean | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") {
    throw new ScenarioError(`argument ${key} must be a boolean, got ${show(value)}`);
  }
  return value;
}

function optionalList(args: Args, key: string): Json[] | undefined {
  const value = args[key];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) {
    throw new ScenarioError(`argument ${key} must be a list, got ${show(value)}`);
  }
  return value;
}

/** A message of `dispatch`, with its tool calls (assistant) or the call it answers (tool). */
function messageInput(item: Json): MessageInput {
  const message = asArgs(item);
  return {
    id: optionalText(message, "id") ?? "",
    role: text(message, "role") as RoleName,
    content: text(message, "content"),
    toolCalls: optionalList(message, "tool_calls")?.map((entry) => {
      const call = asArgs(entry);
      return { id: text(call, "id"), name: text(call, "name"), arguments: text(call, "arguments") };
    }),
    toolCallId: optionalText(message, "tool_call_id"),
  };
}

/** A tool of `tools`; its `parameters` mapping is the JSON Schema, integers as numbers. */
function toolDeclaration(item: Json): ToolDeclarationInput {
  const tool = asArgs(item);
  const parameters = tool["parameters"];
  if (parameters !== undefined && parameters !== null && !isArgs(parameters)) {
    throw new ScenarioError(`argument parameters must be a mapping, got ${show(parameters)}`);
  }
  return {
    name: text(tool, "name"),
    description: optionalText(tool, "description"),
    parameters: isArgs(parameters) ? asArgs(plain(parameters)) : undefined,
  };
}

function resultInput(item: Json): ToolResultInput {
  const result = asArgs(item);
  return {
    toolCallId: text(result, "tool_call_id"),
    content: text(result, "content"),
    messageId: optionalText(result, "message_id"),
  };
}

function approvalInput(item: Json): ToolApprovalInput {
  const approval = asArgs(item);
  const approved = optionalBoolean(approval, "approved");
  if (approved === undefined) {
    throw new ScenarioError(`an approval needs approved, got ${show(approval)}`);
  }
  return {
    toolCallId: text(approval, "tool_call_id"),
    approved,
    reason: optionalText(approval, "reason"),
  };
}

/** A scenario value as JSON.stringify takes it: the bigints of its integers as numbers. */
function plain(value: Json): Json {
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  if (isArgs(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, plain(item)]));
  }
  return value;
}

/** The `on_disconnect` argument of a turn: `continue`, `cancel`, or not sent. */
function disconnectMode(args: Args): DisconnectModeName | undefined {
  const mode = args["on_disconnect"];
  if (mode === undefined || mode === null) return undefined;
  if (mode === "continue" || mode === "cancel") return mode;
  throw new ScenarioError(`on_disconnect must be continue or cancel, got ${show(mode)}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
