// createNodeTransport over TLS against a live server that requires client certificates
// (started by tests/conformance/test_typescript.py; skipped without it).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { ChatClient, ChatError } from "@agentskit/chat-client";
import { createNodeTransport, type NodeTransportOptions } from "@agentskit/chat-client/node";

const TARGET = process.env["AGENTSKIT_CHAT_TLS_TARGET"];
const skip = TARGET === undefined ? "no TLS server: AGENTSKIT_CHAT_TLS_TARGET is not set" : false;
const pem = (name: string): string => readFileSync(process.env[name] ?? "", "utf8");

async function definitions(options: NodeTransportOptions): Promise<string> {
  const client = new ChatClient(createNodeTransport(TARGET ?? "", options), { timeoutMs: 10_000 });
  try {
    return (await client.listDefinitions()).map((definition) => definition.id).join(",");
  } catch (error) {
    assert.ok(error instanceof ChatError, String(error));
    return error.codeName;
  }
}

test("mutual TLS with the given roots and client certificate", { skip }, async () => {
  const roots = pem("AGENTSKIT_CHAT_TLS_CA");
  const client = {
    clientCertificate: pem("AGENTSKIT_CHAT_TLS_CERT"),
    clientPrivateKey: new TextEncoder().encode(pem("AGENTSKIT_CHAT_TLS_KEY")),
  };
  assert.equal(
    await definitions({ tls: { rootCertificates: roots, ...client } }),
    "coffee,orders,support",
  );
  const named = { rootCertificates: roots, serverName: "localhost", ...client };
  assert.equal(await definitions({ tls: named }), "coffee,orders,support");
  const misnamed = { ...named, serverName: "elsewhere.invalid" };
  const refused = {
    "a name the certificate does not have": await definitions({ tls: misnamed }),
    "no client certificate": await definitions({ tls: { rootCertificates: roots } }),
    "the system roots": await definitions({ tls: true }),
    plaintext: await definitions({}),
  };
  for (const [attempt, outcome] of Object.entries(refused)) {
    assert.match(outcome, /^[A-Z_]+$/, `${attempt} must fail with a ChatError, got ${outcome}`);
  }
});
