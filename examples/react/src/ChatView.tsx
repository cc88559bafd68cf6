// One chat over the AI SDK's useChat: its messages with their decision badges and tool
// calls, the composer, and the state panel with the commands the current state offers.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { authHeaders, type Config } from "./config.js";
import { commandButtons, snapshotOf, type Definition } from "./definitions.js";
import { MessageItem } from "./MessageItem.js";
import {
  latestSnapshot,
  latestState,
  snapshotPart,
  textOf,
  toolNameOf,
  toolPartsOf,
  type ChatMessage,
  type SnapshotPart,
} from "./parts.js";
import { loadMessages, saveMessages } from "./storage.js";
import type { Approve } from "./ToolCard.js";
import { PAGE_TOOLS, runPageTool } from "./tools.js";

interface Props {
  readonly config: Config;
  readonly definition: Definition;
  readonly chatId: string;
  /** Reopened after a reload: reattach to the chat's running turn, if any. */
  readonly reopened: boolean;
}

const STATUS_TEXT = {
  submitted: "Waiting for the answer…",
  streaming: "The answer is streaming…",
  ready: "",
  error: "",
} as const;

export function ChatView({ config, definition, chatId, reopened }: Props) {
  const api = `${config.serverUrl}/ai-sdk/${encodeURIComponent(definition.id)}`;
  const transport = useMemo(
    () =>
      new DefaultChatTransport<ChatMessage>({
        api,
        headers: authHeaders(config),
        // The turn goes on when the page goes away, so that a reload reattaches to it; the
        // tools the page runs go with every request (useChat sends no declarations itself).
        body: { resumable: true, tools: PAGE_TOOLS },
      }),
    [config, api],
  );
  const [streamed, setStreamed] = useState<SnapshotPart>();
  // The calls of the running request the model made for the page to run (onToolCall).
  const called = useRef(new Set<string>());
  const {
    messages,
    setMessages,
    sendMessage,
    regenerate,
    stop,
    status,
    error,
    clearError,
    addToolOutput,
    addToolApprovalResponse,
  } = useChat<ChatMessage>({
    id: chatId,
    messages: useMemo(() => loadMessages(chatId), [chatId]),
    transport,
    resume: reopened,
    // A call's input is complete. It runs once the answer has ended: a call of a tool the
    // definition marks for approval is followed by its approval request, and comes back
    // (approved) in the next answer to run then.
    onToolCall: ({ toolCall }) => {
      if (!toolCall.providerExecuted) {
        called.current.add(toolCall.toolCallId);
      }
    },
    onFinish: ({ message, isAbort, isError }) => {
      // Each request's end, counted on the page (its tests wait for it).
      document.body.dataset.finished = String(Number(document.body.dataset.finished ?? "0") + 1);
      const ready = toolPartsOf(message).filter(
        (part) => called.current.has(part.toolCallId) && part.state === "input-available",
      );
      called.current.clear();
      if (isAbort || isError) {
        return;
      }
      for (const part of ready) {
        // After useChat has looked at the ended answer: the last output sends the chat again.
        void Promise.resolve().then(() => {
          const tool = toolNameOf(part);
          const outcome = runPageTool(tool, part.input);
          return "output" in outcome
            ? addToolOutput({ tool, toolCallId: part.toolCallId, output: outcome.output })
            : addToolOutput({ tool, toolCallId: part.toolCallId, state: "output-error", errorText: outcome.error });
        });
      }
    },
    // The answer goes on by itself once every call of its last step has an output or an
    // approval response.
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) ||
      lastAssistantMessageIsCompleteWithApprovalResponses(options),
    onData: (part) => {
      const snapshot = snapshotPart(part.type, part.data);
      if (snapshot !== undefined) {
        setStreamed(snapshot);
      }
    },
  });
  const [input, setInput] = useState("");
  const inputRef = useRef<HTMLTextAreaElement>(null);
  const [stopping, setStopping] = useState(false);
  const busy = status === "submitted" || status === "streaming" || stopping;

  useEffect(() => saveMessages(chatId, messages), [chatId, messages]);
  useEffect(() => {
    document.body.dataset.status = status;
  }, [status]);

  const snapshot: SnapshotPart =
    streamed ??
    latestSnapshot(messages) ??
    snapshotOf(definition, latestState(messages) ?? definition.initialState);
  // The snapshot's own commands; before the first turn, the definition's for its initial state.
  const commands = [...new Set(snapshot.commands?.map((command) => command.input) ?? commandButtons(definition, snapshot))];

  const last = messages.at(-1);
  /** Send `text` as the next user message; false when nothing was sent. */
  const send = (text: string): boolean => {
    if (!text.trim() || busy) {
      return false;
    }
    if (status === "error" && last?.role === "assistant" && !textOf(last) && !toolPartsOf(last).length) {
      setMessages(messages.slice(0, -1)); // the failed turn's empty answer is no history
    }
    clearError();
    void sendMessage({ text });
    return true;
  };
  const approve: Approve = useCallback(
    ({ id, approved }) => {
      void addToolApprovalResponse({ id, approved });
    },
    [addToolApprovalResponse],
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (send(input)) {
      setInput("");
    }
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) {
      submit(event);
    } else if (event.key === "Escape" && busy) {
      stopTurn();
    }
  };
  // A resumable turn outlives its request: stop() only detaches the page, so the front's
  // cancel request then ends the turn itself (204 whether or not one ran). Nothing is sent
  // until it has answered, so that it cannot cancel the next turn.
  const stopTurn = () => {
    setStopping(true);
    void stop()
      .then(() =>
        fetch(`${api}/${encodeURIComponent(chatId)}/cancel`, {
          method: "POST",
          headers: authHeaders(config),
        }),
      )
      .catch(() => undefined)
      .finally(() => setStopping(false));
  };

  return (
    <section id="chat" aria-labelledby="chat-heading">
      <h2 id="chat-heading">Conversation</h2>
      <p className="session-line">
        Chat <code id="chat-id">{chatId}</code> of <span id="chat-definition">{definition.id}</span>
      </p>
      <div className="chat-layout">
        <div className="conversation">
          <ol id="messages" aria-label="Messages">
            {messages.map((message) => (
              <MessageItem
                key={message.id}
                message={message}
                streaming={busy && message === last && message.role === "assistant"}
                busy={busy}
                onApprove={approve}
              />
            ))}
          </ol>
          <form id="composer" onSubmit={submit}>
            <label htmlFor="message-input">Message</label>
            <textarea
              id="message-input"
              ref={inputRef}
              rows={2}
              value={input}
              aria-describedby="composer-hint"
              onChange={(event) => setInput(event.target.value)}
              onKeyDown={onKeyDown}
            />
            <p id="composer-hint" className="hint">
              Enter sends, Shift+Enter starts a new line, Escape stops the answer.
            </p>
            <div className="composer-buttons">
              <button type="submit" id="send" disabled={busy}>
                Send
              </button>
              <button type="button" id="stop" disabled={!busy || stopping} onClick={stopTurn}>
                Stop
              </button>
              <button
                type="button"
                id="regenerate"
                disabled={busy || last === undefined}
                onClick={() => {
                  clearError();
                  void regenerate();
                }}
              >
                Regenerate
              </button>
            </div>
          </form>
        </div>
        <aside id="state-panel" aria-labelledby="state-heading">
          <h3 id="state-heading">
            State: <span id="state-name">{snapshot.state}</span>
          </h3>
          <h4 id="actions-heading">Actions</h4>
          <ul id="actions" aria-labelledby="actions-heading">
            {snapshot.actions.length ? (
              snapshot.actions.map((action) => (
                <li key={action} className="action">
                  {action}
                </li>
              ))
            ) : (
              <li className="none">none</li>
            )}
          </ul>
          <h4 id="commands-heading">Commands</h4>
          <div id="commands" role="group" aria-labelledby="commands-heading">
            {commands.length ? (
              commands.map((command) => (
                <button
                  key={command}
                  type="button"
                  className="command"
                  data-command={command}
                  disabled={busy}
                  onClick={() => {
                    send(command);
                    inputRef.current?.focus();
                  }}
                >
                  {command}
                </button>
              ))
            ) : (
              <p className="none">none in this state</p>
            )}
          </div>
        </aside>
      </div>
      <p id="status" role="status" aria-live="polite">
        {STATUS_TEXT[status]}
      </p>
      {error !== undefined && (
        <p id="error" role="alert">
          The turn failed: {errorText(error)}
        </p>
      )}
    </section>
  );
}

/**
 * A failure's message: the message of the front's JSON refusal (`{"error": {code, message}}`)
 * when the request was refused, else the stream's error text ("code: message").
 */
function errorText(error: Error): string {
  try {
    const body: unknown = JSON.parse(error.message);
    const refusal = typeof body === "object" && body !== null && "error" in body ? body.error : undefined;
    if (typeof refusal === "object" && refusal !== null && "message" in refusal) {
      return String(refusal.message);
    }
  } catch {
    // Not JSON: the stream's own error text.
  }
  return error.message || "unknown error";
}
