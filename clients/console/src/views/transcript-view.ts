import type { Session, SessionEvent } from "@skillenv/client/web";
import { describeFailure } from "../connection.ts";
import { badge, formatJson, h, replaceChildren, type Child } from "../dom.ts";
import { Transcript, type Approval, type Entry, type Operation, type Outcome, type ToolEntry } from "../transcript.ts";
import type { ViewContext } from "./common.ts";

/**
 * The session's events as a live transcript: the journal from its first event, then each new one
 * as it is written (WatchSession, a server stream). `onEvent` sees every event, for the parts
 * of the page that change with them. A dropped stream can be resumed where it stopped.
 */
export function transcriptView(context: ViewContext, session: Session, onEvent: (event: SessionEvent) => void): HTMLElement {
  const transcript = new Transcript();
  const rendered = new Map<Entry, HTMLElement>();
  const list = h("ol", { class: "transcript", "aria-live": "polite" });
  const status = h("p", { class: "stream-status" });

  const decide = async (entry: ToolEntry, approve: boolean, message: string) => {
    const run = await session.runs.get(entry.runId!);
    const approvalId = entry.approval!.id;
    if (approve) await run.approve(approvalId, { label: APPROVER_LABEL });
    else await run.deny(approvalId, { label: APPROVER_LABEL, message });
  };
  const show = (entry: Entry) => {
    const element = renderEntry(entry, decide);
    const previous = rendered.get(entry);
    if (previous) previous.replaceWith(element);
    else list.append(element);
    rendered.set(entry, element);
  };

  const watch = async () => {
    replaceChildren(status, h("span", { class: "live" }, "Live"), " following the session's events");
    try {
      for await (const event of session.events({ after: transcript.lastSeq, signal: context.signal })) {
        const entry = transcript.apply(event);
        if (entry) show(entry);
        for (const changed of transcript.takeAlsoChanged()) show(changed);
        onEvent(event);
      }
      if (!context.signal.aborted) replaceChildren(status, "The stream ended: the session is over.");
    } catch (error) {
      const retry = h("button", { type: "button", class: "secondary small", onclick: () => void watch() }, "Reconnect");
      replaceChildren(status, h("span", { class: "error" }, `Disconnected: ${describeFailure(error)}`), " ", retry);
    }
  };
  void watch();
  return h("div", null, status, list);
}

/** What the console calls itself in a decision (`decidedBy.label`); the key's workspace is recorded beside it. */
const APPROVER_LABEL = "console";

/** Decides a pending approval; its event re-renders the entry. */
type Decide = (entry: ToolEntry, approve: boolean, message: string) => Promise<void>;

function renderEntry(entry: Entry, decide: Decide): HTMLElement {
  const item = (role: string, ...children: Child[]) =>
    h(
      "li",
      { class: `entry entry-${entry.kind}`, "data-seq": entry.seq },
      h("span", { class: "seq" }, entry.seq),
      h("div", { class: "who" }, role),
      h("div", { class: "what" }, children),
    );
  switch (entry.kind) {
    case "note":
      return item("", h("span", { class: entry.tone === "warning" ? "warning" : "muted" }, entry.text));
    case "user":
      return item("User", h("div", { class: "bubble" }, entry.message), h("div", { class: "meta" }, submittedWith(entry.model, entry.skills, entry.files)));
    case "model":
      return item(
        "Model",
        h("div", { class: entry.streaming ? "bubble model streaming" : "bubble model" }, entry.text),
        entry.usage && h("div", { class: "meta" }, `round ${entry.round} · read ${entry.usage.inputTokens} tokens, wrote ${entry.usage.outputTokens}`),
      );
    case "tool":
      return item("Tool", toolCall(entry, decide));
    case "operation":
      return item("", h("span", { class: "muted" }, `${entry.operationKind} of ${entry.operation.environment}: `), receiptLine(entry.operation));
    case "end":
      return item("", badge(entry.status), " ", entry.text);
  }
}

function submittedWith(model: string, skills: string[], files: string[]): string {
  const parts = [`to ${model}`];
  if (skills.length > 0) parts.push(`skills ${skills.join(", ")}`);
  if (files.length > 0) parts.push(`files ${files.join(", ")}`);
  return parts.join(" · ");
}

function toolCall(entry: ToolEntry, decide: Decide): HTMLElement {
  const where = entry.operation ? ` → ${entry.operation.environment}` : entry.name === "skills" ? " (answered by the service)" : "";
  const outcome = entry.result ?? entry.operation?.receipt;
  return h(
    "div",
    { class: "tool-call" },
    h(
      "div",
      { class: "tool-head" },
      h("code", { class: "strong" }, entry.name),
      h("span", { class: "muted" }, where),
      entry.runId === undefined && h("span", { class: "muted" }, " · called directly"),
    ),
    !isEmptyObject(entry.input) && h("pre", { class: "input" }, formatJson(entry.input)),
    entry.approval && approvalBlock(entry, entry.approval, decide),
    entry.operation && h("div", { class: "receipts" }, receiptLine(entry.operation)),
    outcome && outcomeBlock(outcome),
  );
}

/**
 * A call waiting for a person: Approve sends it, Deny refuses it with the reason typed (the model
 * receives it as the tool's error result). Once decided, who decided and how.
 */
function approvalBlock(entry: ToolEntry, approval: Approval, decide: Decide): HTMLElement {
  if (approval.status !== "pending") {
    const who = approval.decidedBy ? ` by ${approval.decidedBy.label || "(no label)"} (workspace ${approval.decidedBy.workspace})` : "";
    const text =
      approval.status === "expired"
        ? "the run ended before anyone decided; the tool was not called"
        : `${approval.status}${who}${approval.message ? `: ${approval.message}` : ""}`;
    return h("p", { class: "approval", "data-approval": approval.status }, badge(approval.status), " ", text);
  }
  const reason = h("input", { type: "text", placeholder: "optional; the model reads it", "aria-label": "Reason for denying" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const buttons: HTMLButtonElement[] = [];
  const act = (approve: boolean) => async () => {
    for (const button of buttons) button.disabled = true;
    try {
      await decide(entry, approve, reason.value);
    } catch (failure) {
      error.hidden = false;
      replaceChildren(error, describeFailure(failure));
      for (const button of buttons) button.disabled = false;
    }
  };
  buttons.push(
    h("button", { type: "button", class: "small", onclick: () => void act(true)() }, "Approve"),
    h("button", { type: "button", class: "secondary small", onclick: () => void act(false)() }, "Deny"),
  );
  return h(
    "div",
    { class: "approval approval-pending", "data-approval": "pending", role: "group", "aria-label": `Approval of ${entry.name}` },
    h("p", null, badge("pending"), " ", h("strong", null, "Waiting for your approval:"), " nothing is sent until you decide."),
    h("div", { class: "approval-actions" }, buttons, reason),
    error,
  );
}

/** The operation's receipts so far, e.g. "sent · accepted · checking the clock · returned". */
function receiptLine(operation: Operation): HTMLElement {
  const steps: Child[] = ["sent"];
  if (operation.accepted) steps.push(" · accepted");
  for (const message of operation.progress) steps.push(" · ", h("em", null, message));
  steps.push(" · ", operation.receipt ? badge(operation.receipt.outcome) : h("span", { class: "muted" }, "waiting for a receipt…"));
  return h("span", { class: "receipt-line" }, steps);
}

function outcomeBlock(outcome: Outcome): HTMLElement {
  switch (outcome.outcome) {
    case "returned":
      return h("pre", { class: "output" }, formatJson(outcome.output));
    case "failure":
      return h("p", { class: "output failure" }, `${outcome.code}: ${outcome.message}`);
    case "unknown":
      return h("p", { class: "output unknown" }, `It may or may not have run: ${outcome.message}`);
  }
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}
