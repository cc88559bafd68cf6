// Entry point: a Connect (or gRPC-Web) transport to the service, same origin unless
// ?server=, and the app.
import { ChatClient } from "@agentskit/chat-client";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { App } from "./app.js";
import { readConfig } from "./config.js";
import { byId } from "./dom.js";

const config = readConfig(window.location);
byId("server-url", HTMLElement).textContent = `${config.serverUrl} (${config.protocol})`;
const transport =
  config.protocol === "grpc-web"
    ? createGrpcWebTransport({ baseUrl: config.serverUrl })
    : createConnectTransport({ baseUrl: config.serverUrl });
const app = new App(new ChatClient(transport, { token: config.token }));
void app.start(config.sessionId);
