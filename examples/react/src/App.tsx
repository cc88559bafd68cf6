// The page: pick a definition, start (or reopen) a chat of it, and chat.
import { useEffect, useState, type FormEvent } from "react";
import { ChatView } from "./ChatView.js";
import { rememberChat, type Config } from "./config.js";
import { listDefinitions, type Definition } from "./definitions.js";

interface OpenChat {
  readonly definition: Definition;
  readonly chatId: string;
  /** True when the chat was reopened from the address (a reload): its turn may be running. */
  readonly reopened: boolean;
}

export function App({ config }: { config: Config }) {
  const [definitions, setDefinitions] = useState<Definition[]>();
  const [loadError, setLoadError] = useState<string>();
  const [selected, setSelected] = useState<string>("");
  const [chat, setChat] = useState<OpenChat>();

  useEffect(() => {
    const abort = new AbortController();
    listDefinitions(config, abort.signal).then(
      (found) => {
        setDefinitions(found);
        const wanted = found.find((definition) => definition.id === config.definitionId);
        setSelected(wanted?.id ?? found[0]?.id ?? "");
        if (wanted !== undefined && config.chatId !== undefined) {
          setChat({ definition: wanted, chatId: config.chatId, reopened: true });
        }
      },
      (error: unknown) => {
        if (!abort.signal.aborted) {
          setLoadError(error instanceof Error ? error.message : String(error));
        }
      },
    );
    return () => abort.abort();
  }, [config]);

  const start = (event: FormEvent) => {
    event.preventDefault();
    const definition = definitions?.find((candidate) => candidate.id === selected);
    if (definition !== undefined) {
      const chatId = crypto.randomUUID();
      rememberChat({ definitionId: definition.id, chatId });
      setChat({ definition, chatId, reopened: false });
    }
  };
  const description = definitions?.find((definition) => definition.id === selected)?.description;

  return (
    <>
      <header>
        <h1>AgentsKit Chat</h1>
        <p className="server">
          React and the AI SDK&apos;s <code>useChat</code> on <code id="server-url">{config.serverUrl}</code>
        </p>
      </header>
      <main>
        <section id="setup" aria-labelledby="setup-heading">
          <h2 id="setup-heading">Chat</h2>
          <form id="start-form" onSubmit={start}>
            <label htmlFor="definition">Chat definition</label>
            <select
              id="definition"
              required
              value={selected}
              aria-describedby="definition-description"
              onChange={(event) => setSelected(event.target.value)}
            >
              {(definitions ?? []).map((definition) => (
                <option key={definition.id} value={definition.id}>
                  {definition.id}
                </option>
              ))}
            </select>
            <p id="definition-description" className="hint">
              {description}
            </p>
            <button type="submit" id="start" disabled={definitions === undefined}>
              Start a new chat
            </button>
          </form>
        </section>
        {chat !== undefined && (
          <ChatView
            key={chat.chatId}
            config={config}
            definition={chat.definition}
            chatId={chat.chatId}
            reopened={chat.reopened}
          />
        )}
        {loadError !== undefined && (
          <p id="load-error" role="alert">
            {loadError}
          </p>
        )}
      </main>
    </>
  );
}
