// One tool call of an answer: the tool, its arguments, where it is and what it gave; a call
// waiting for approval offers Approve and Deny.
import { toolNameOf, toolStatus, type ToolPart } from "./parts.js";

/** The user's answer to an approval request (useChat's addToolApprovalResponse). */
export type Approve = (response: { id: string; approved: boolean }) => void;

/** `value` as indented JSON (a string as it is). */
function pretty(value: unknown): string {
  if (typeof value === "string") {
    return value;
  }
  return JSON.stringify(value, null, 2) ?? String(value);
}

/** What the call gave, in words: its output, its error, or its denial. */
function resultOf(part: ToolPart): string | undefined {
  switch (part.state) {
    case "output-available":
      return pretty(part.output);
    case "output-error":
      return part.errorText;
    case "output-denied":
    case "approval-responded":
      if (part.approval.approved === true) {
        return undefined;
      }
      return part.approval.reason ? `Denied: ${part.approval.reason}` : "Denied.";
    default:
      return undefined;
  }
}

export function ToolCard({ part, onApprove, busy }: { part: ToolPart; onApprove: Approve; busy: boolean }) {
  const name = toolNameOf(part);
  const status = toolStatus(part);
  const result = resultOf(part);
  const headingId = `tool-${part.toolCallId}`;
  const streamingInput = part.state === "input-streaming";
  return (
    <section
      className="tool-card"
      data-tool-call-id={part.toolCallId}
      data-tool-state={part.state}
      aria-labelledby={headingId}
    >
      <h4 className="tool-heading" id={headingId}>
        <span className="tool-label">Tool</span> <code className="tool-name">{name}</code>{" "}
        <span className={`tool-status status-${status.replace(/ /g, "-")}`} data-status={status}>
          {status}
        </span>
      </h4>
      <h5>Arguments</h5>
      <pre className="tool-args">{streamingInput && part.input === undefined ? "…" : pretty(part.input ?? {})}</pre>
      {result !== undefined && (
        <>
          <h5>{part.state === "output-error" ? "Error" : "Result"}</h5>
          <pre className={`tool-result ${part.state === "output-error" ? "failed" : ""}`}>{result}</pre>
        </>
      )}
      {part.state === "approval-requested" && (
        <div className="tool-approval" role="group" aria-label={`Run ${name}?`}>
          <button
            type="button"
            className="approve"
            disabled={busy}
            onClick={() => onApprove({ id: part.approval.id, approved: true })}
          >
            Approve
          </button>
          <button
            type="button"
            className="deny"
            disabled={busy}
            onClick={() => onApprove({ id: part.approval.id, approved: false })}
          >
            Deny
          </button>
        </div>
      )}
    </section>
  );
}
