// One message: who said it, how the service answered it (badges), its text and its tool calls.
import { memo } from "react";
import { decisionOf, segmentsOf, type ChatMessage, type Decision } from "./parts.js";
import { ToolCard, type Approve } from "./ToolCard.js";

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
  busy,
  onApprove,
}: {
  message: ChatMessage;
  streaming: boolean;
  /** A request is running: approvals wait for it. */
  busy: boolean;
  onApprove: Approve;
}) {
  const decision = message.role === "assistant" ? decisionOf(message) : undefined;
  const segments = segmentsOf(message);
  const said = segments.some((segment) => segment.kind === "tool" || segment.text !== "");
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
      {segments.length === 0 && <div className="content" />}
      {segments.map((segment) =>
        segment.kind === "text" ? (
          <div key={segment.key} className="content">
            {segment.text}
          </div>
        ) : (
          <ToolCard key={segment.key} part={segment.part} onApprove={onApprove} busy={busy} />
        ),
      )}
      {message.role === "assistant" && !streaming && !said && <p className="reply-note">No answer.</p>}
    </li>
  );
});
