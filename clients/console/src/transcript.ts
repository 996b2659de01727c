import type { SessionEvent } from "@skillenv/client";

/**
 * A session's events (docs/events.md) folded into a transcript people can read: the user's
 * message, the model's text (growing while it streams), each tool call with where it was sent,
 * its receipts and its result, and the turn's end. Pure: the view renders the entries, and
 * re-renders the one each event added or changed.
 */

/** How a tool call or an operation ended. */
export type Outcome =
  | { outcome: "returned"; output: unknown }
  | { outcome: "failure"; code: string; message: string }
  | { outcome: "unknown"; message: string };

/** An environment operation as its events tell it: sent, then accepted, progress, one receipt. */
export interface Operation {
  id: string;
  environment: string;
  accepted: boolean;
  progress: string[];
  receipt: Outcome | undefined;
}

interface Base {
  /** The event that started the entry. */
  seq: number;
  at: Date;
}

export interface NoteEntry extends Base {
  kind: "note";
  text: string;
  tone: "info" | "warning";
}

export interface UserEntry extends Base {
  kind: "user";
  runId: string;
  message: string;
  model: string;
  skills: string[];
  files: string[];
}

export interface ModelEntry extends Base {
  kind: "model";
  runId: string;
  round: number;
  text: string;
  /** True until the round's whole message has arrived. */
  streaming: boolean;
  usage: { inputTokens: number; outputTokens: number } | undefined;
}

/**
 * A person's decision on a call of a tool placed with approval "always" (docs/runs.md,
 * "Approvals"): asked (`tool.approval_requested`), then approved or denied once, or expired with
 * the run.
 */
export interface Approval {
  id: string;
  status: "pending" | "approved" | "denied" | "expired";
  /** Who decided, as `tool.approved` / `tool.denied` say: the label given and the key's workspace. */
  decidedBy: { workspace: string; label: string } | undefined;
  /** A denial's message, as the model received it. */
  message: string;
}

/** A tool call: a run's (tool.call), or a direct CallTool (an execute operation without a run). */
export interface ToolEntry extends Base {
  kind: "tool";
  runId: string | undefined;
  name: string;
  input: unknown;
  /** Present when the call waited (or waits) for a person's decision. */
  approval: Approval | undefined;
  /** Where the service sent it; the skills meta-tool is answered by the service itself and has none. */
  operation: Operation | undefined;
  result: Outcome | undefined;
}

/** Any other operation on an environment: setup, stage, cancel, detach, teardown. */
export interface OperationEntry extends Base {
  kind: "operation";
  operationKind: string;
  operation: Operation;
}

export interface EndEntry extends Base {
  kind: "end";
  runId: string;
  status: "completed" | "failed" | "cancelled";
  text: string;
}

export type Entry = NoteEntry | UserEntry | ModelEntry | ToolEntry | OperationEntry | EndEntry;

/** An event's data, read as docs/events.md documents it for its type. */
// biome-ignore lint/suspicious/noExplicitAny: each event type's case reads the fields docs/events.md gives it
type Data = Record<string, any>;

export class Transcript {
  readonly entries: Entry[] = [];
  /** The last event applied: where a dropped stream resumes. */
  lastSeq = 0;
  readonly #operations = new Map<string, Operation>();
  readonly #models = new Map<string, ModelEntry>();
  readonly #calls = new Map<string, ToolEntry>();
  /** A run's tool calls not yet matched with their operation, by run and tool name, oldest first. */
  readonly #unsent = new Map<string, ToolEntry[]>();
  /** Entries an event changed besides the one `apply` answered (a run's end expires its pending approvals). */
  #alsoChanged: Entry[] = [];

  /** The entries the last `apply` changed besides the one it answered; each is handed out once. */
  takeAlsoChanged(): Entry[] {
    const changed = this.#alsoChanged;
    this.#alsoChanged = [];
    return changed;
  }

  /** Applies one event; answers the entry it added or changed, if any. */
  apply(event: SessionEvent): Entry | undefined {
    if (event.seq <= this.lastSeq) return undefined;
    this.lastSeq = event.seq;
    const data = event.data as Data;
    const base = { seq: event.seq, at: event.at };
    switch (event.type) {
      case "session.created":
        return this.#add({ ...base, kind: "note", tone: "info", text: sessionCreated(data) });
      case "environment.ready":
        return this.#add({ ...base, kind: "note", tone: "info", text: `${data.environment} is ready` });
      case "environment.failed":
        return this.#add({ ...base, kind: "note", tone: "warning", text: `setting ${data.environment} up failed` });
      case "session.ended":
        return this.#add({ ...base, kind: "note", tone: "info", text: "The session ended" });
      case "run.submitted":
        return this.#add({
          ...base,
          kind: "user",
          runId: data.runId,
          message: data.message,
          model: `${data.model.provider} ${data.model.name}`,
          skills: skillNames(data.skills),
          files: names(data.files, "path"),
        });
      case "assistant.delta":
        return this.#delta(base, data);
      case "assistant.message":
        return this.#message(base, data);
      case "model.usage":
        return this.#usage(data);
      case "tool.call":
        return this.#toolCall(base, data);
      case "tool.result":
        return this.#toolResult(data);
      case "tool.approval_requested":
      case "tool.approved":
      case "tool.denied":
        return this.#approval(event.type, data);
      case "operation.sent":
        return this.#sent(base, data);
      case "operation.accepted":
      case "operation.progress":
      case "operation.receipt":
        return this.#operationUpdate(event.type, data);
      case "turn.completed":
      case "turn.failed":
      case "run.cancelled":
        this.#expireApprovals(data.runId);
        return this.#add({ ...base, kind: "end", runId: data.runId, ...turnEnd(event.type, data) });
      case "turn.started":
      case "run.resumed":
      case "model.request":
        // Bookkeeping of the turn: the entries around them say what happened.
        return undefined;
      default:
        return this.#add({ ...base, kind: "note", tone: "info", text: `${event.type} ${JSON.stringify(data)}` });
    }
  }

  #add<T extends Entry>(entry: T): T {
    this.entries.push(entry);
    return entry;
  }

  #delta(base: Base, data: Data): ModelEntry {
    const entry = this.#modelEntry(base, data);
    entry.text += data.text;
    return entry;
  }

  /** The round's whole reply: its text replaces the streamed pieces. A reply of tool calls alone has no text to show. */
  #message(base: Base, data: Data): ModelEntry | undefined {
    const streamed = this.#models.get(modelKey(data));
    if (!streamed && data.text === "") return undefined;
    const entry = streamed ?? this.#modelEntry(base, data);
    entry.text = data.text;
    entry.streaming = false;
    return entry;
  }

  #usage(data: Data): ModelEntry | undefined {
    const entry = this.#models.get(modelKey(data));
    if (entry) entry.usage = { inputTokens: data.inputTokens, outputTokens: data.outputTokens };
    return entry;
  }

  #modelEntry(base: Base, data: Data): ModelEntry {
    const key = modelKey(data);
    let entry = this.#models.get(key);
    if (!entry) {
      entry = this.#add({ ...base, kind: "model", runId: data.runId, round: data.round, text: "", streaming: true, usage: undefined });
      this.#models.set(key, entry);
    }
    return entry;
  }

  #toolCall(base: Base, data: Data): ToolEntry {
    const entry = this.#add<ToolEntry>({
      ...base,
      kind: "tool",
      runId: data.runId,
      name: data.name,
      input: data.input,
      approval: undefined,
      operation: undefined,
      result: undefined,
    });
    this.#calls.set(`${data.runId}/${data.callId}`, entry);
    const key = `${data.runId}/${data.name}`;
    this.#unsent.set(key, [...(this.#unsent.get(key) ?? []), entry]);
    return entry;
  }

  #toolResult(data: Data): ToolEntry | undefined {
    const entry = this.#calls.get(`${data.runId}/${data.callId}`);
    if (!entry) return undefined;
    if (data.outcome === "returned") entry.result = { outcome: "returned", output: data.output };
    else if (data.outcome === "failure") entry.result = { outcome: "failure", code: data.error.code, message: data.error.message };
    else entry.result = { outcome: "unknown", message: data.message };
    return entry;
  }

  /**
   * A run's tool call is followed by the operation that carries it (same run, same tool), so the
   * operation joins that call's entry; any other operation gets an entry of its own.
   */
  #sent(base: Base, data: Data): Entry {
    const operation: Operation = { id: data.operationId, environment: data.environment, accepted: false, progress: [], receipt: undefined };
    this.#operations.set(operation.id, operation);
    if (data.kind !== "execute") return this.#add({ ...base, kind: "operation", operationKind: data.kind, operation });
    const call = data.runId === undefined ? undefined : this.#unsent.get(`${data.runId}/${data.tool}`)?.shift();
    if (call) {
      call.operation = operation;
      return call;
    }
    return this.#add({
      ...base,
      kind: "tool",
      runId: data.runId,
      name: data.tool ?? "agent loop",
      input: data.input,
      approval: undefined,
      operation,
      result: undefined,
    });
  }

  #approval(type: string, data: Data): ToolEntry | undefined {
    const entry = this.#calls.get(`${data.runId}/${data.callId}`);
    if (!entry) return undefined;
    if (type === "tool.approval_requested") entry.approval = { id: data.approvalId, status: "pending", decidedBy: undefined, message: "" };
    else if (entry.approval)
      Object.assign(entry.approval, {
        status: type === "tool.approved" ? "approved" : "denied",
        decidedBy: data.decidedBy,
        message: data.message ?? "",
      });
    return entry;
  }

  /** A run that ended left its undecided approvals expired: nothing can decide them any more. */
  #expireApprovals(runId: string): void {
    for (const entry of this.#calls.values()) {
      if (entry.runId !== runId || entry.approval?.status !== "pending") continue;
      entry.approval.status = "expired";
      this.#alsoChanged.push(entry);
    }
  }

  #operationUpdate(type: string, data: Data): Entry | undefined {
    const operation = this.#operations.get(data.operationId);
    if (!operation) return undefined;
    if (type === "operation.accepted") operation.accepted = true;
    else if (type === "operation.progress") operation.progress.push(data.data);
    else operation.receipt = outcomeOfReceipt(data.receipt);
    return this.entries.findLast((entry) => "operation" in entry && entry.operation === operation);
  }
}

/** A journal receipt, `{"returned": {...}} | {"failure": {...}} | {"unknown": {...}}`, as an outcome. */
function outcomeOfReceipt(receipt: Data): Outcome {
  if (receipt.returned) return { outcome: "returned", output: receipt.returned.output ?? null };
  if (receipt.failure) return { outcome: "failure", code: receipt.failure.code, message: receipt.failure.message };
  return { outcome: "unknown", message: receipt.unknown?.message ?? "" };
}

function sessionCreated(data: Data): string {
  const environments = data.environments.map((environment: Data) => `${environment.name} (${environment.kind})`).join(", ");
  const tools = data.tools.length > 0 ? `; tools ${data.tools.join(", ")}` : "";
  return `Session created with ${environments || "no environments"}${tools}`;
}

function turnEnd(type: string, data: Data): Pick<EndEntry, "status" | "text"> {
  const counts = `${data.rounds} ${data.rounds === 1 ? "round" : "rounds"}, ${data.toolCalls} tool ${data.toolCalls === 1 ? "call" : "calls"}, ${data.usage.inputTokens} + ${data.usage.outputTokens} tokens`;
  if (type === "turn.completed") return { status: "completed", text: `Completed (${data.stopReason}): ${counts}` };
  const status = type === "turn.failed" ? "failed" : "cancelled";
  return { status, text: `${status === "failed" ? "Failed" : "Cancelled"}: ${data.code}: ${data.message} (${counts})` };
}

function modelKey(data: Data): string {
  return `${data.runId}/${data.round}`;
}

/** Each skill by name, with the version it resolved to when the service says (`release-notes v3`, `pinned` when pinned). */
function skillNames(list: Data[] | undefined): string[] {
  return (list ?? []).map((skill) => {
    if (typeof skill.version !== "number" || skill.version === 0) return String(skill.name);
    return `${skill.name} v${skill.version}${skill.pinned ? " (pinned)" : ""}`;
  });
}

function names(list: Data[] | undefined, field: string): string[] {
  return (list ?? []).map((item) => String(item[field]));
}
