// Where the page finds the service, read from its address.
//
//   ?server=URL      the service's HTTP listener (the page's own origin when absent)
//   ?token=TOKEN     the bearer token sent with every request (none when absent)
//   ?chat=ID         the chat to reopen (the page keeps it current, so a reload resumes it)
//   ?definition=ID   the definition of that chat

/** The page's settings. */
export interface Config {
  /** Base URL of the service's HTTP listener, without a trailing slash. */
  readonly serverUrl: string;
  readonly token: string | undefined;
  readonly chatId: string | undefined;
  readonly definitionId: string | undefined;
}

/** The settings in `location` (the page's address). */
export function readConfig(location: Location | URL): Config {
  const params = new URL(location.href).searchParams;
  const server = params.get("server")?.trim() || location.origin;
  return {
    serverUrl: server.replace(/\/+$/, ""),
    token: params.get("token")?.trim() || undefined,
    chatId: params.get("chat")?.trim() || undefined,
    definitionId: params.get("definition")?.trim() || undefined,
  };
}

/** The headers every request to the service carries. */
export function authHeaders(config: Config): Record<string, string> {
  return config.token === undefined ? {} : { authorization: `Bearer ${config.token}` };
}

/** Keep the open chat in the address bar, so that a reload reopens it. */
export function rememberChat(chat: { definitionId: string; chatId: string } | undefined): void {
  const url = new URL(window.location.href);
  if (chat === undefined) {
    url.searchParams.delete("chat");
    url.searchParams.delete("definition");
  } else {
    url.searchParams.set("definition", chat.definitionId);
    url.searchParams.set("chat", chat.chatId);
  }
  window.history.replaceState(null, "", url);
}
