// The AI SDK's own client code (package `ai`, unchanged) against the server's /ai-sdk/ front.
//
// Usage: node chat.mjs SCENARIO; reads AISDK_API (e.g. http://127.0.0.1:PORT/ai-sdk/chat),
// AISDK_TOKEN and the scenario's texts from the environment. Progress lines and the result
// are printed as JSON lines ({"event": ...} then {"result": ...}); the Python test that
// started it asserts on them, and answers an {"event": "waiting"} line by writing a line
// to stdin once it has done what the scenario waits for.
//
// The chat is a headless `AbstractChat` (what `useChat` runs, minus React), whose transport
// is `DefaultChatTransport` with every chunk it yields recorded on the way.
import { createInterface } from "node:readline";
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from "ai";

const api = process.env.AISDK_API;
const token = process.env.AISDK_TOKEN;
const headers = token ? { authorization: `Bearer ${token}` } : {};
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

function emit(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

async function waitFor(what) {
  emit({ event: "waiting", for: what });
  await lines.next();
}

class PlainState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = [...this.messages, message];
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class HeadlessChat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new PlainState() });
  }
}

/** DefaultChatTransport, recording the chunks of each response. */
class RecordingTransport {
  constructor(options) {
    this.inner = new DefaultChatTransport(options);
    this.chunks = [];
  }
  record(stream) {
    const chunks = [];
    this.chunks.push(chunks);
    return stream.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          chunks.push(chunk);
          controller.enqueue(chunk);
        },
      }),
    );
  }
  async sendMessages(options) {
    return this.record(await this.inner.sendMessages(options));
  }
  async reconnectToStream(options) {
    const stream = await this.inner.reconnectToStream(options);
    return stream === null ? null : this.record(stream);
  }
}

function chat(id, body = {}, onData = undefined) {
  const transport = new RecordingTransport({ api, headers, body });
  return { chat: new HeadlessChat({ id, transport, onData }), transport };
}

function view(chat, transport) {
  const last = chat.messages[chat.messages.length - 1];
  return {
    status: chat.status,
    error: chat.error ? String(chat.error.message) : null,
    roles: chat.messages.map((m) => m.role),
    last,
    chunks: transport.chunks[transport.chunks.length - 1] ?? [],
  };
}

/** Deterministic turns, a regenerate, an agentic turn, a failure and a retry of it. */
async function turns() {
  const { chat: c, transport } = chat(process.env.AISDK_CHAT_ID);
  const steps = [];
  await c.sendMessage({ text: "/start" });
  steps.push(view(c, transport));
  await c.sendMessage({ text: "/name Ada" });
  steps.push(view(c, transport));
  await c.regenerate();
  steps.push(view(c, transport));
  await c.sendMessage({ text: process.env.AISDK_STREAM_TEXT });
  steps.push(view(c, transport));
  await c.sendMessage({ text: process.env.AISDK_FAIL_TEXT });
  steps.push(view(c, transport));
  await c.regenerate();
  steps.push(view(c, transport));
  return steps;
}

/** A request with a token the server does not know, and a reconnect with it. */
async function badToken() {
  const { chat: c, transport } = chat("chat-bad-token");
  await c.sendMessage({ text: "/start" });
  let reconnect = null;
  try {
    await transport.inner.reconnectToStream({ chatId: "chat-bad-token" });
  } catch (error) {
    reconnect = String(error.message);
  }
  return { send: view(c, transport), reconnect };
}

async function readUntil(reader, predicate) {
  const seen = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { seen, done: true };
    seen.push(value);
    if (predicate(value)) return { seen, done: false };
  }
}

/** A resumable turn whose connection is cut mid-answer, then reattached by a new Chat
 * (a page loaded again) with `resumeStream()`, and by the transport's reconnect request. */
async function resume() {
  const id = process.env.AISDK_CHAT_ID;
  const first = new DefaultChatTransport({ api, headers, body: { resumable: true } });
  const aborter = new AbortController();
  const user = { id: "u-resume", role: "user", parts: [{ type: "text", text: process.env.AISDK_SLOW_TEXT }] };
  const stream = await first.sendMessages({
    chatId: id,
    messages: [user],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: aborter.signal,
  });
  const reader = stream.getReader();
  const before = await readUntil(reader, (chunk) => chunk.type === "text-delta");
  aborter.abort();
  await reader.cancel().catch(() => {});
  emit({ event: "cut", chunks: before.seen });
  // A reconnect request while the turn runs: the whole turn, from its start.
  const again = await first.reconnectToStream({ chatId: id });
  const watched = again.getReader();
  const replayed = await readUntil(watched, (chunk) => chunk.type === "text-delta");
  // A new page: a Chat holding the user message, resuming the chat's stream.
  let attached;
  const decided = new Promise((resolve) => {
    attached = resolve;
  });
  const { chat: page, transport } = chat(id, {}, (part) => {
    if (part.type === "data-agentskit-decision") attached();
  });
  page.messages = [user];
  const resumed = page.resumeStream();
  await decided;
  await waitFor("model resumed");
  const rest = await readUntil(watched, () => false);
  await resumed;
  const afterwards = view(page, transport);
  // Assembled with readUIMessageStream from the reconnect's chunks.
  let message = null;
  const all = [...replayed.seen, ...rest.seen];
  const source = new ReadableStream({
    start(controller) {
      for (const item of all) controller.enqueue(item);
      controller.close();
    },
  });
  for await (const m of readUIMessageStream({ stream: source })) message = m;
  const none = await first.reconnectToStream({ chatId: id });
  return { before: before.seen, reconnect: all, message, afterwards, noneAfter: none === null };
}

/** A turn that is not resumable, cut mid-answer: it is cancelled, so nothing runs after. */
async function cancelled() {
  const id = process.env.AISDK_CHAT_ID;
  const transport = new DefaultChatTransport({ api, headers });
  const aborter = new AbortController();
  const user = { id: "u-cut", role: "user", parts: [{ type: "text", text: process.env.AISDK_SLOW_TEXT }] };
  const stream = await transport.sendMessages({
    chatId: id,
    messages: [user],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: aborter.signal,
  });
  const reader = stream.getReader();
  const before = await readUntil(reader, (chunk) => chunk.type === "text-delta");
  aborter.abort();
  await reader.cancel().catch(() => {});
  await waitFor("turn cancelled");
  const after = await transport.reconnectToStream({ chatId: id });
  return { before: before.seen, reconnected: after !== null };
}

/** A tool round: the tools declared through the transport's body, each call run by
 * `onToolCall` with `addToolOutput`, and the answer continued by `sendAutomaticallyWhen`. */
async function tools() {
  const declared = JSON.parse(process.env.AISDK_TOOLS);
  const transport = new RecordingTransport({ api, headers, body: { tools: declared } });
  const calls = [];
  const chat = new HeadlessChat({
    id: process.env.AISDK_CHAT_ID,
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      calls.push(toolCall);
      // Not awaited, as the AI SDK advises inside onToolCall.
      chat.addToolOutput({
        tool: toolCall.toolName,
        toolCallId: toolCall.toolCallId,
        output: { ran: toolCall.toolName, note: process.env.AISDK_NOTE },
      });
    },
  });
  await chat.sendMessage({ text: "/tools" });
  return {
    calls,
    requests: transport.chunks.length,
    first: transport.chunks[0],
    ...view(chat, transport),
  };
}

const scenarios = { turns, badToken, resume, cancelled, tools };
const scenario = scenarios[process.argv[2]];
if (!scenario) {
  console.error(`unknown scenario ${process.argv[2]}`);
  process.exit(2);
}
try {
  emit({ result: await scenario() });
} catch (error) {
  emit({ failure: String(error?.stack ?? error) });
  process.exitCode = 1;
} finally {
  stdin.close();
}
