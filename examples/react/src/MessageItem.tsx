// One message: who said it, how the service answered it (badges), and its text.
import { memo } from "react";
import { decisionOf, textOf, type ChatMessage, type Decision } from "./parts.js";

function Badges({ decision }: { decision: Decision }) {
  return (
    <ul className="badges" aria-label="How the service answered">
      <li className={`badge kind-${decision.kind}`} data-badge="kind">
        {decision.kind}
      </li>
      {decision.route && (
        <li className="badge route" data-badge="route" title="Route">
          {decision.route}
        </li>
      )}
      {decision.from !== decision.to && (
        <li className="badge transition" data-badge="transition" title="State transition">
          {decision.from} → {decision.to}
        </li>
      )}
      {decision.replayed && (
        <li className="badge replayed" data-badge="replayed" title="A recorded decision, replayed">
          replayed
        </li>
      )}
    </ul>
  );
}

export const MessageItem = memo(function MessageItem({
  message,
  streaming,
}: {
  message: ChatMessage;
  streaming: boolean;
}) {
  const decision = message.role === "assistant" ? decisionOf(message) : undefined;
  const text = textOf(message);
  return (
    <li
      className={`message ${message.role}`}
      data-role={message.role}
      data-message-id={message.id}
      aria-busy={streaming}
      {...(streaming ? { "data-streaming": "" } : {})}
    >
      <span className="role">{message.role === "user" ? "You" : "Assistant"}</span>
      {decision !== undefined && <Badges decision={decision} />}
      <div className="content">{text}</div>
      {message.role === "assistant" && !streaming && !text && <p className="reply-note">No answer.</p>}
    </li>
  );
});
