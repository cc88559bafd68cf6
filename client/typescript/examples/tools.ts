import { ChatClient, ToolWait } from "@agentskit/chat-client";
import type {
  ToolApprovalInput,
  ToolDeclarationInput,
  ToolResultInput,
  TurnCompleted,
  TurnEvent,
} from "@agentskit/chat-client";

const tools: ToolDeclarationInput[] = [
  {
    name: "local_time",
    description: "The current time in an IANA time zone",
    parameters: {
      type: "object",
      properties: { zone: { type: "string", description: "e.g. Europe/Paris" } },
      required: ["zone"],
    },
  },
];

function localTime(args: { zone?: string }): string {
  const time = new Date().toLocaleTimeString("en-GB", { timeZone: args.zone ?? "UTC" });
  return JSON.stringify({ time });
}

/** Print a turn's text and tool calls as they stream; resolve to its completed event. */
async function show(events: AsyncIterable<TurnEvent>): Promise<TurnCompleted> {
  for await (const event of events) {
    if (event.kind === "delta") process.stdout.write(event.value.text);
    if (event.kind === "toolCallStarted") console.log(`\n[calling ${event.value.name}]`);
    if (event.kind === "completed") return event.value;
    if (event.kind === "failed") throw new Error(`turn failed: ${event.value.code}`);
  }
  throw new Error("the turn stream ended without its last event");
}

/** Ask a question the model may answer by calling local_time, which runs here. */
export async function askWithTools(
  client: ChatClient,
  sessionId: string,
  question: string,
  approve: (name: string) => boolean = () => true, // for tools the definition guards
): Promise<void> {
  let completed = await show(client.submit(sessionId, question, { tools }));
  while (completed.pendingToolCalls.length > 0) {
    const results: ToolResultInput[] = [];
    const approvals: ToolApprovalInput[] = [];
    for (const pending of completed.pendingToolCalls) {
      const call = completed.toolCalls.find((c) => c.id === pending.toolCallId);
      if (pending.wait === ToolWait.APPROVAL) {
        const approved = approve(pending.name);
        approvals.push({ toolCallId: pending.toolCallId, approved });
        if (!approved) continue; // the model reads that the call was denied
      }
      const content =
        pending.name === "local_time"
          ? localTime(JSON.parse(call?.arguments || "{}") as { zone?: string })
          : JSON.stringify({ error: "unknown tool" });
      results.push({ toolCallId: pending.toolCallId, content });
    }
    // Declare the same tools again: the continued answer may call them once more.
    completed = await show(client.toolResults(sessionId, { results, approvals }, { tools }));
  }
}
