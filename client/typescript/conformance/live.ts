// The live server the tests talk to, from the conformance harness's variables.
import { ChatClient, type ChatClientOptions } from "@agentskit/chat-client";
import { createNodeTransport } from "@agentskit/chat-client/node";

export const TARGET = process.env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"];
export const TOKEN = process.env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"];

/** The `skip` option of a test needing the live server. */
export const SKIP_WITHOUT_SERVER: string | false =
  TARGET === undefined
    ? "no live server: run `python -m tests.conformance.harness` and set the variables it prints"
    : false;

/** A client of the live server with this language's token (the options override it). */
export function liveClient(options: ChatClientOptions = {}): ChatClient {
  if (TARGET === undefined) {
    throw new Error("AGENTSKIT_CHAT_CONFORMANCE_TARGET is not set");
  }
  return new ChatClient(createNodeTransport(TARGET), { token: TOKEN, ...options });
}
