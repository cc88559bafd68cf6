import { ChatClient } from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";

const target = process.env["AGENTSKIT_CHAT_TARGET"] ?? "127.0.0.1:50051";
const token = process.env["AGENTSKIT_CHAT_TOKEN"]; // sent as `authorization: Bearer …`
const client = new ChatClient(createNodeTransport(target), { token, timeoutMs: 30_000 });

const session = await client.createSession("support");
for await (const event of client.submit(session.sessionId, "/start")) {
  if (event.kind === "delta") process.stdout.write(event.value.text);
  if (event.kind === "completed") console.log(`\n[${event.value.snapshot?.state}]`);
  if (event.kind === "failed") console.log(`\n[${event.value.code}] ${event.value.message}`);
}
