// The corpus runs' settings (conformance/protocols.ts): which variables each protocol reads,
// and what its transport puts on the wire, seen by a local HTTP/1.1 or h2c server.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { createServer as createH2cServer, type ServerHttp2Session } from "node:http2";
import type { AddressInfo, Server } from "node:net";
import { test } from "node:test";
import { ChatClient } from "@agentskit/chat-client";
import { type Protocol, setting, testName } from "../conformance/protocols.js";

interface Seen {
  readonly httpVersion: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
}

const ENV = {
  AGENTSKIT_CHAT_CONFORMANCE_TARGET: "127.0.0.1:1",
  AGENTSKIT_CHAT_CONFORMANCE_TOKEN: "grpc-token",
  AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN: "grpc-limited",
  AGENTSKIT_CHAT_CONFORMANCE_CONNECT_TOKEN: "connect-token",
  AGENTSKIT_CHAT_CONFORMANCE_CONNECT_LIMITED_TOKEN: "connect-limited",
  AGENTSKIT_CHAT_CONFORMANCE_GRPCWEB_TOKEN: "grpcweb-token",
  AGENTSKIT_CHAT_CONFORMANCE_GRPCWEB_LIMITED_TOKEN: "grpcweb-limited",
};

/**
 * The request a protocol's ListDefinitions makes, answered with NOT_FOUND by `server`;
 * `disconnect` ends the connections the client keeps open, so that the server can close.
 */
async function firstRequest(
  protocol: Protocol,
  server: Server,
  seen: Seen[],
  disconnect: () => void,
): Promise<Seen> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const env = { ...ENV, AGENTSKIT_CHAT_CONFORMANCE_HTTP_URL: `http://127.0.0.1:${port}` };
    const { transport, tokens } = setting(protocol, env);
    assert.ok(transport !== undefined);
    const client = new ChatClient(transport, { token: tokens.tenant, timeoutMs: 10_000 });
    await assert.rejects(client.listDefinitions(), { name: "ChatError", codeName: "NOT_FOUND" });
  } finally {
    disconnect();
    await new Promise((resolve) => server.close(resolve));
  }
  assert.equal(seen.length, 1);
  return seen[0] as Seen;
}

test("each protocol's run reads its own tokens, and skips without its address", () => {
  for (const [protocol, prefix] of [
    ["grpc", "grpc"],
    ["connect", "connect"],
    ["grpcweb", "grpcweb"],
  ] as const) {
    const { transport, tokens, skip } = setting(protocol, {
      ...ENV,
      AGENTSKIT_CHAT_CONFORMANCE_HTTP_URL: "http://127.0.0.1:1",
    });
    assert.ok(transport !== undefined);
    assert.equal(skip, false);
    assert.deepEqual(tokens, { tenant: `${prefix}-token`, limited: `${prefix}-limited` });
  }
  assert.equal(setting("grpc", {}).transport, undefined);
  assert.match(String(setting("connect", ENV).skip), /no live server/);
  assert.match(String(setting("grpcweb", ENV).skip), /no live server/);
  assert.equal(testName("grpc", "submit-agentic"), "submit-agentic");
  assert.equal(testName("connect", "submit-agentic"), "connect: submit-agentic");
});

test("the Connect run posts JSON over HTTP/1.1 with its own token", async () => {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    const { httpVersion, url, headers } = request;
    seen.push({ httpVersion, path: url ?? "", headers });
    request.resume();
    request.on("end", () => {
      response.writeHead(404, { "content-type": "application/json" });
      response.end(JSON.stringify({ code: "not_found", message: "nothing here" }));
    });
  });
  const request = await firstRequest("connect", server, seen, () => server.closeAllConnections());
  assert.equal(request.httpVersion, "1.1");
  assert.equal(request.path, "/agentskit.chat.v1.ChatService/ListDefinitions");
  assert.equal(request.headers["content-type"], "application/json");
  assert.equal(request.headers["authorization"], "Bearer connect-token");
});

test("the gRPC-Web run posts binary messages over HTTP/2 with its own token", async () => {
  const seen: Seen[] = [];
  const server = createH2cServer((request, response) => {
    seen.push({ httpVersion: request.httpVersion, path: request.url, headers: request.headers });
    request.resume();
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/grpc-web+proto", "grpc-status": "5" });
      response.end();
    });
  });
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (session) => sessions.add(session));
  const request = await firstRequest("grpcweb", server, seen, () => {
    for (const session of sessions) session.destroy();
  });
  assert.equal(request.httpVersion, "2.0");
  assert.equal(request.path, "/agentskit.chat.v1.ChatService/ListDefinitions");
  assert.equal(request.headers["content-type"], "application/grpc-web+proto");
  assert.equal(request.headers["authorization"], "Bearer grpcweb-token");
});
