// Where the renderer finds the service, read from the page's address.
//
//   ?server=URL         the service's HTTP listener (the page's own origin when absent)
//   ?token=TOKEN        the bearer token sent with every call (none when absent)
//   ?protocol=grpc-web  gRPC-Web instead of the Connect protocol
//   ?session=ID         the session to resume; the renderer keeps it current

/** The wire protocols the service's HTTP listener speaks. */
export type Protocol = "connect" | "grpc-web";

/** The renderer's settings. */
export interface Config {
  /** Base URL of the service's HTTP listener, without a trailing slash. */
  readonly serverUrl: string;
  readonly protocol: Protocol;
  readonly token: string | undefined;
  readonly sessionId: string | undefined;
}

/** The settings in `location` (the page's address). */
export function readConfig(location: Location | URL): Config {
  const params = new URL(location.href).searchParams;
  const server = params.get("server")?.trim() || location.origin;
  return {
    serverUrl: server.replace(/\/+$/, ""),
    protocol: params.get("protocol") === "grpc-web" ? "grpc-web" : "connect",
    token: params.get("token")?.trim() || undefined,
    sessionId: params.get("session")?.trim() || undefined,
  };
}

/** Keep the current session id in the address bar, so that a reload resumes it. */
export function rememberSession(sessionId: string | undefined): void {
  const url = new URL(window.location.href);
  if (sessionId === undefined) {
    url.searchParams.delete("session");
  } else {
    url.searchParams.set("session", sessionId);
  }
  window.history.replaceState(null, "", url);
}
