// What a turn does to the history, as the renderer shows it while the turn runs.

/** A turn the renderer can run on the current session. */
export type TurnAction =
  | { readonly kind: "submit"; readonly content: string }
  | { readonly kind: "retry"; readonly messageId: string }
  | { readonly kind: "edit"; readonly messageId: string; readonly content: string }
  | { readonly kind: "regenerate"; readonly messageId: string };

/** Whether `value` (read back from storage) is a {@link TurnAction}. */
export function isTurnAction(value: unknown): value is TurnAction {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const action = value as Record<string, unknown>;
  const text = (name: string): boolean => typeof action[name] === "string";
  switch (action["kind"]) {
    case "submit":
      return text("content");
    case "retry":
    case "regenerate":
      return text("messageId");
    case "edit":
      return text("messageId") && text("content");
    default:
      return false;
  }
}
