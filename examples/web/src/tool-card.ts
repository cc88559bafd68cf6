// One tool call as a card: the tool, its arguments, its status and its result; a call that
// waits for approval offers Approve and Deny (with an optional reason).
import { h } from "./dom.js";
import type { ToolCallView } from "./tool-view.js";

/** What a card's buttons do; without them the card only shows the call. */
export interface ToolCardActions {
  approve(callId: string): void;
  deny(callId: string, reason: string): void;
  /** The reason typed so far, kept across renders of the card. */
  draft(callId: string, reason: string): void;
  /** The reason typed so far for `callId`. */
  drafted(callId: string): string;
}

/** A class-safe word for `status` ("waiting-for-approval"). */
const statusClass = (status: string): string => `status-${status.replace(/ /g, "-")}`;

/** The card of `view`; `actions` offers Approve and Deny while the call waits for them. */
export function toolCard(view: ToolCallView, actions?: ToolCardActions): HTMLElement {
  // Call ids are the model's: the element ids only need to be unique within the page.
  const headingId = `tool-${view.id}`;
  const asking = actions !== undefined && view.status === "waiting for approval";
  return h(
    "section",
    {
      class: "tool-card",
      "data-tool-call-id": view.id,
      "data-status": view.status,
      "aria-labelledby": headingId,
    },
    h(
      "h4",
      { class: "tool-heading", id: headingId },
      h("span", { class: "tool-label" }, "Tool"),
      " ",
      h("code", { class: "tool-name" }, view.name),
      " ",
      h("span", { class: `tool-status ${statusClass(view.status)}` }, view.status),
    ),
    h("h5", {}, "Arguments"),
    h("pre", { class: "tool-args" }, view.arguments || "…"),
    view.result !== undefined && h("h5", {}, "Result"),
    view.result !== undefined && h("pre", { class: "tool-result" }, view.result),
    asking && approvalForm(view, actions),
  );
}

/** Approve, or Deny with the reason typed. */
function approvalForm(view: ToolCallView, actions: ToolCardActions): HTMLFormElement {
  const reasonId = `tool-reason-${view.id}`;
  const reason = h("input", {
    id: reasonId,
    class: "tool-reason",
    autocomplete: "off",
    value: actions.drafted(view.id),
  });
  reason.addEventListener("input", () => actions.draft(view.id, reason.value));
  const approve = h("button", { type: "button", class: "approve" }, "Approve");
  approve.addEventListener("click", () => actions.approve(view.id));
  // Enter in the reason denies: the reason is only read for a denial.
  const deny = h("button", { type: "submit", class: "deny" }, "Deny");
  const form = h(
    "form",
    { class: "tool-approval", role: "group", "aria-label": `Run ${view.name}?` },
    h("label", { for: reasonId }, "Reason to deny (optional)"),
    reason,
    approve,
    deny,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    actions.deny(view.id, reason.value.trim());
  });
  return form;
}
