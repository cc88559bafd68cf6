// Drives the OpenAI-compatible front with the official `openai` npm package, unchanged.
// Usage: node chat.mjs SCENARIO; reads AGENTSKIT_OPENAI_BASE_URL and AGENTSKIT_CHAT_TOKEN and
// prints one JSON object with what the scenario saw (the Python tests check it).
import OpenAI from "openai";

const baseURL = process.env.AGENTSKIT_OPENAI_BASE_URL;
const client = new OpenAI({
  baseURL,
  apiKey: process.env.AGENTSKIT_CHAT_TOKEN ?? "no-token",
  maxRetries: 0,
  timeout: 30_000,
});
const user = (content) => ({ role: "user", content });

const scenarios = {
  // A deterministic turn, not streamed: the answer and the decision from the raw response.
  async deterministic() {
    const { data, response } = await client.chat.completions
      .create({ model: "support", messages: [user("/start")] })
      .withResponse();
    return {
      content: data.choices[0].message.content,
      finish: data.choices[0].finish_reason,
      kind: response.headers.get("x-agentskit-kind"),
      decision: data.agentskit,
    };
  },
  // An agentic turn, streamed with usage: the text, the first chunk's decision, the usage.
  async agentic() {
    const stream = await client.chat.completions.create({
      model: "support",
      messages: [user("Tell me a joke")],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let decision = null;
    let usage = null;
    for await (const chunk of stream) {
      decision ??= chunk.agentskit ?? null;
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage ?? usage;
    }
    return { text, decision, usage };
  },
  // A client-held conversation: the same keyed request twice gets the whole answer twice.
  async retry() {
    const headers = { "X-AgentsKit-Conversation": "node-chat", "Idempotency-Key": "node-turn" };
    const ask = () =>
      client.chat.completions.create({ model: "support", messages: [user("/start")] }, { headers });
    const first = await ask();
    const again = await ask();
    return {
      contents: [first.choices[0].message.content, again.choices[0].message.content],
      turns: [first.agentskit.turn_id, again.agentskit.turn_id],
    };
  },
  // Refusals: a bad token, an unknown model.
  async refusals() {
    const seen = {};
    const bad = new OpenAI({ baseURL, apiKey: "not-a-token", maxRetries: 0 });
    try {
      await bad.chat.completions.create({ model: "support", messages: [user("hi")] });
    } catch (error) {
      seen.badToken = { status: error.status, code: error.code, auth: error instanceof OpenAI.AuthenticationError };
    }
    try {
      await client.chat.completions.create({ model: "nonexistent", messages: [user("hi")] });
    } catch (error) {
      seen.unknownModel = { status: error.status, code: error.code, notFound: error instanceof OpenAI.NotFoundError };
    }
    return seen;
  },
  // A tool round: the streamed tool_calls deltas gathered as the SDK's users do, then the
  // history again with the assistant's calls and one role "tool" message per call.
  async tools() {
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "The weather in a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const headers = { "X-AgentsKit-Conversation": "node-tools" };
    const messages = [user("What is the weather in Paris?")];
    const stream = await client.chat.completions.create(
      { model: "support", messages, tools, tool_choice: "auto", stream: true },
      { headers },
    );
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const delta of choice?.delta?.tool_calls ?? []) {
        calls[delta.index] ??= { id: delta.id, type: "function", function: { name: delta.function?.name, arguments: "" } };
        calls[delta.index].function.arguments += delta.function?.arguments ?? "";
      }
      finish = choice?.finish_reason ?? finish;
    }
    const results = calls.map((call) => ({ role: "tool", tool_call_id: call.id, content: "sunny" }));
    const second = await client.chat.completions.create(
      {
        model: "support",
        messages: [...messages, { role: "assistant", content: null, tool_calls: calls }, ...results],
        tools,
      },
      { headers },
    );
    return {
      finish,
      calls: calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
      answer: second.choices[0].message.content,
      kind: second.agentskit.kind,
    };
  },
  // A stream aborted after its first piece of text (the SDK ends the iteration quietly).
  async cancel() {
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "support", messages: [user("Tell me a joke")], stream: true },
      { signal: controller.signal, headers: { "X-AgentsKit-Conversation": "node-cancel" } },
    );
    let text = "";
    try {
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? "";
        if (text) controller.abort();
      }
    } catch (error) {
      if (!(error instanceof OpenAI.APIUserAbortError)) throw error;
    }
    return { text, aborted: controller.signal.aborted };
  },
};

const scenario = scenarios[process.argv[2]];
if (!scenario) {
  console.error(`unknown scenario ${process.argv[2]}`);
  process.exit(2);
}
console.log(JSON.stringify(await scenario()));
