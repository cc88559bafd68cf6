// What a turn does to the history, as the renderer shows it while the turn runs.

/** The answers to the tool calls the last answer waits on: results and decisions. */
export interface ToolAnswer {
  readonly results: readonly { readonly toolCallId: string; readonly content: string }[];
  readonly approvals: readonly {
    readonly toolCallId: string;
    readonly approved: boolean;
    readonly reason: string;
  }[];
}

/** A turn the renderer can run on the current session. */
export type TurnAction =
  | { readonly kind: "submit"; readonly content: string }
  | { readonly kind: "retry"; readonly messageId: string }
  | { readonly kind: "edit"; readonly messageId: string; readonly content: string }
  | { readonly kind: "regenerate"; readonly messageId: string }
  | { readonly kind: "toolResults"; readonly answer: ToolAnswer };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null;

/** Whether `value` (read back from storage) is a {@link ToolAnswer}. */
function isToolAnswer(value: unknown): value is ToolAnswer {
  if (!isRecord(value) || !Array.isArray(value["results"]) || !Array.isArray(value["approvals"])) {
    return false;
  }
  const results: unknown[] = value["results"];
  const approvals: unknown[] = value["approvals"];
  return (
    results.every(
      (result) =>
        isRecord(result) &&
        typeof result["toolCallId"] === "string" &&
        typeof result["content"] === "string",
    ) &&
    approvals.every(
      (approval) =>
        isRecord(approval) &&
        typeof approval["toolCallId"] === "string" &&
        typeof approval["approved"] === "boolean" &&
        typeof approval["reason"] === "string",
    )
  );
}

/** Whether `value` (read back from storage) is a {@link TurnAction}. */
export function isTurnAction(value: unknown): value is TurnAction {
  if (!isRecord(value)) {
    return false;
  }
  const action = value;
  const text = (name: string): boolean => typeof action[name] === "string";
  switch (action["kind"]) {
    case "submit":
      return text("content");
    case "retry":
    case "regenerate":
      return text("messageId");
    case "edit":
      return text("messageId") && text("content");
    case "toolResults":
      return isToolAnswer(action["answer"]);
    default:
      return false;
  }
}
