// Entry point: a Connect transport to the service (same origin unless ?server=), the app.
import { ChatClient } from "@agentskit/chat-client";
import { createConnectTransport } from "@connectrpc/connect-web";
import { App } from "./app.js";
import { readConfig } from "./config.js";
import { byId } from "./dom.js";

const config = readConfig(window.location);
byId("server-url", HTMLElement).textContent = config.serverUrl;
const transport = createConnectTransport({ baseUrl: config.serverUrl });
const app = new App(new ChatClient(transport, { token: config.token }));
void app.start(config.sessionId);
