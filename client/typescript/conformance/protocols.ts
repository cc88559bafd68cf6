// The protocols the corpus runs over: native gRPC on the gRPC listener, and Connect (JSON,
// HTTP/1.1) and gRPC-Web (binary, HTTP/2) on the HTTP listener, each with its own tenant.
import { test } from "node:test";
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createNodeTransport } from "@agentskit/chat-client/node";
import { loadScenarios } from "./corpus.js";
import { Runner, type Tokens } from "./runner.js";

/** A protocol of the corpus run. */
export type Protocol = "grpc" | "connect" | "grpcweb";

const SKIP =
  "no live server: run `python -m tests.conformance.harness` and set the variables it prints";

/** The prefix of a protocol's token variables: `AGENTSKIT_CHAT_CONFORMANCE_<PREFIX>TOKEN`. */
const TOKEN_PREFIX: Readonly<Record<Protocol, string>> = {
  grpc: "",
  connect: "CONNECT_",
  grpcweb: "GRPCWEB_",
};

/** What a protocol's run needs from the harness's variables. */
export interface Setting {
  /** The transport, or undefined when the harness's variables do not name the server. */
  readonly transport: Transport | undefined;
  readonly tokens: Tokens;
  /** The `skip` option of its tests. */
  readonly skip: string | false;
}

/** A protocol's transport and tokens, from the variables in `env`. */
export function setting(protocol: Protocol, env: NodeJS.ProcessEnv = process.env): Setting {
  const variable = (name: string): string | undefined =>
    env[`AGENTSKIT_CHAT_CONFORMANCE_${name}`];
  const prefix = TOKEN_PREFIX[protocol];
  const tokens = {
    tenant: variable(`${prefix}TOKEN`) ?? "",
    limited: variable(`${prefix}LIMITED_TOKEN`) ?? "",
  };
  const transport = createTransport(
    protocol,
    protocol === "grpc" ? variable("TARGET") : variable("HTTP_URL"),
  );
  return { transport, tokens, skip: transport === undefined ? SKIP : false };
}

function createTransport(protocol: Protocol, address: string | undefined): Transport | undefined {
  if (address === undefined) {
    return undefined;
  }
  switch (protocol) {
    case "grpc":
      return createNodeTransport(address);
    case "connect":
      return createConnectTransport({
        baseUrl: address,
        httpVersion: "1.1",
        useBinaryFormat: false,
      });
    case "grpcweb":
      return createGrpcWebTransport({ baseUrl: address, httpVersion: "2", useBinaryFormat: true });
  }
}

/** The test name of a scenario run over `protocol`: the scenario's own name for gRPC. */
export function testName(protocol: Protocol, scenario: string): string {
  return protocol === "grpc" ? scenario : `${protocol}: ${scenario}`;
}

/** One `node:test` test per scenario file, run over `protocol`. */
export function testCorpus(protocol: Protocol): void {
  const { transport, tokens, skip } = setting(protocol);
  for (const scenario of loadScenarios()) {
    test(testName(protocol, scenario.name), { skip }, async () => {
      if (transport !== undefined) {
        await new Runner(transport, tokens, scenario).run();
      }
    });
  }
}
