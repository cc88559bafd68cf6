import { ChatClient, ChatError } from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";

const target = process.env["AGENTSKIT_CHAT_TARGET"] ?? "localhost:50051";
const token = process.env["AGENTSKIT_CHAT_TOKEN"]; // needed when the server has --auth-tokens
const client = new ChatClient(createNodeTransport(target), { token, timeoutMs: 30_000 });

try {
  const session = await client.createSession("support");
  console.log(`session ${session.sessionId} in state ${session.snapshot?.state}`);
  for await (const event of client.submit(session.sessionId, "Tell me a joke")) {
    const { kind, value } = event;
    if (kind === "delta") process.stdout.write(value.text); // each delta as it arrives
    if (kind === "completed") console.log(`\ncompleted in state ${value.snapshot?.state}`);
    if (kind === "failed") console.log(`\nfailed: ${value.code}: ${value.message}`); // drop deltas
  }
} catch (error) {
  if (!(error instanceof ChatError)) throw error; // refused: code, reason and metadata say why
  console.error(error.message); // "UNAUTHENTICATED ERROR_REASON_UNAUTHENTICATED: …"
  process.exitCode = 1;
}
