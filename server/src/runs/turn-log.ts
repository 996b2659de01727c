import type { ConversationMessage } from "../models/index.ts";
import { prefixEnd, type Table, type WriteOp } from "../storage/index.ts";
import type { ToolCall, ToolResult } from "./default-loop.ts";
import { APPROVAL_EXPIRED_MESSAGE, DEFAULT_DENIAL_MESSAGE, DENIED_CODE, type ApprovalRecord } from "./approvals.ts";
import type { RunRecord } from "./records.ts";

/** A running run's counters, as its record holds them. */
export type TurnCounters = Pick<RunRecord, "rounds" | "toolCalls" | "usage">;

/**
 * What a resumed turn needs of its submission beyond the run's record (docs/runs.md, "A run
 * interrupted by a restart"), logged with the run's record when it may resume: a default-loop
 * run, with SERVICE_RUN_RESUME on.
 */
export interface ResumableSubmission {
  /** The provider key, sealed (AES-256-GCM with the server's sealing key); removed with the log. */
  sealedKey: string;
  message: string;
  agentsMd: string;
  maxRounds: number;
  files: Array<{ path: string; assetSha256: string }>;
}

/**
 * One row of a turn's log: its counters, a message it added (a reply with its stop reason), one
 * tool result of a round in progress, or what it needs to resume.
 */
export type TurnLogEntry =
  | { counters: TurnCounters }
  | { message: ConversationMessage; stopReason?: string }
  | { result: ToolResult }
  | { submission: ResumableSubmission };

/** What a turn had done when its process stopped, read back from its log. */
export interface LoggedTurn {
  counters: TurnCounters | undefined;
  /** The messages the turn added, in order: the user's message, then each reply and its tool results. */
  messages: ConversationMessage[];
  /** Results of the last reply's tool calls that had come back, by call id. */
  results: Map<string, ToolResult>;
  /** The stop reason of the last message, when it is a reply. */
  stopReason: string | undefined;
  /** Present when the run may resume. */
  submission: ResumableSubmission | undefined;
  /** Every row's key, for the resumed turn's log to remove with the run's end. */
  keys: string[];
}

/**
 * What a running turn has done so far, kept beside its events so that a restart can rebuild the
 * run instead of losing it (docs/runs.md, "Stop, restart and resumption"). The turn hands the
 * operations to the events it records anyway (model.request, assistant.message, tool.call,
 * tool.result), so keeping the log costs no write of its own: each row is durable with its event.
 * Rows are keyed `<sessionId>/<runId>/<kind>/...` and removed with the run's last event.
 */
export class TurnLog {
  readonly #table: Table<TurnLogEntry>;
  readonly #prefix: string;
  readonly #written = new Set<string>();
  /** Messages of the turn already in the log. */
  #messages = 0;

  /** `logged`: what the turn's earlier process left, when this continues it. */
  constructor(table: Table<TurnLogEntry>, sessionId: string, runId: string, logged?: LoggedTurn) {
    this.#table = table;
    this.#prefix = turnLogPrefix(sessionId, runId);
    if (logged) {
      for (const key of logged.keys) this.#written.add(key);
      this.#messages = logged.messages.length;
    }
  }

  /** What the turn needs to resume after a restart, written with the run's record. */
  submission(submission: ResumableSubmission): WriteOp {
    return this.#put("submission", { submission });
  }

  counters({ rounds, toolCalls, usage }: TurnCounters): WriteOp {
    return this.#put("counters", { counters: { rounds, toolCalls, usage: { ...usage } } });
  }

  /** The messages of `added` not yet in the log. */
  messagesOf(added: readonly ConversationMessage[]): WriteOp[] {
    const ops: WriteOp[] = [];
    for (; this.#messages < added.length; this.#messages++) ops.push(this.#message(this.#messages, added[this.#messages]!));
    return ops;
  }

  /** The reply that will be `added[index]` (logged as it is recorded, before the loop adds it). */
  reply(index: number, message: ConversationMessage, stopReason: string): WriteOp {
    this.#messages = Math.max(this.#messages, index + 1);
    return this.#put(messageSuffix(index), { message, stopReason });
  }

  result(result: ToolResult): WriteOp {
    return this.#put(`r/${result.toolCallId}`, { result });
  }

  /** Removes every row this turn wrote (with the run's last event). */
  clearOps(): WriteOp[] {
    return [...this.#written].map((key) => this.#table.deleteOp(key));
  }

  #message(index: number, message: ConversationMessage): WriteOp {
    return this.#put(messageSuffix(index), { message });
  }

  #put(suffix: string, entry: TurnLogEntry): WriteOp {
    const key = `${this.#prefix}${suffix}`;
    this.#written.add(key);
    return this.#table.putOp(key, entry);
  }
}

/** The log a stopped process left for the run, and the operations that remove it. */
export async function readTurnLog(table: Table<TurnLogEntry>, sessionId: string, runId: string): Promise<{ logged: LoggedTurn; clearOps: WriteOp[] }> {
  const prefix = turnLogPrefix(sessionId, runId);
  const logged: LoggedTurn = { counters: undefined, messages: [], results: new Map(), stopReason: undefined, submission: undefined, keys: [] };
  // Keys sort as the turn wrote them: counters, m/<index> in order, r/<call id>, submission.
  for (const [key, entry] of await table.entries({ gt: prefix, lt: prefixEnd(prefix) })) {
    logged.keys.push(key);
    if ("counters" in entry) logged.counters = entry.counters;
    else if ("message" in entry) {
      logged.messages.push(entry.message);
      logged.stopReason = entry.stopReason;
    } else if ("result" in entry) logged.results.set(entry.result.toolCallId, entry.result);
    else logged.submission = entry.submission;
  }
  return { logged, clearOps: logged.keys.map((key) => table.deleteOp(key)) };
}

function messageSuffix(index: number): string {
  return `m/${String(index).padStart(6, "0")}`;
}

function turnLogPrefix(sessionId: string, runId: string): string {
  return `${sessionId}/${runId}/`;
}

/**
 * The conversation an interrupted turn keeps: every message it logged and, when its last reply
 * asked for tools, a result for each call: the one that came back; for a call a person denied,
 * the denial; for one still waiting for a person's decision, that the run ended before one
 * (`waiting`: a resumed turn waits again and replaces it); else an error saying the outcome is
 * unknown (the call may have been sent; nothing is sent again), so that the conversation stays one
 * a provider accepts and the model learns what happened. `unknown` and `denied`: the calls given
 * those results, which no event reported yet.
 */
export function interruptedConversation(
  logged: LoggedTurn,
  approvals: readonly ApprovalRecord[] = [],
): { messages: ConversationMessage[]; unknown: ToolCall[]; denied: ApprovalRecord[]; waiting: ApprovalRecord[] } {
  const messages = [...logged.messages];
  const none = { messages, unknown: [], denied: [], waiting: [] };
  const last = messages.at(-1);
  if (last?.role !== "assistant") return none;
  const calls = last.content.filter((part): part is ToolCall => part.type === "tool_call");
  if (calls.length === 0) return none;
  const approvalOf = new Map(approvals.map((approval) => [approval.callId, approval]));
  const unknown: ToolCall[] = [];
  const denied: ApprovalRecord[] = [];
  const waiting: ApprovalRecord[] = [];
  const errorResult = (id: string, code: string, message: string): ToolResult => ({
    type: "tool_result",
    toolCallId: id,
    output: JSON.stringify({ error: { code, message } }),
    isError: true,
  });
  const resultOf = (call: ToolCall): ToolResult => {
    const result = logged.results.get(call.id);
    if (result) return result;
    const approval = approvalOf.get(call.id);
    if (approval?.status === "denied") {
      denied.push(approval);
      return errorResult(call.id, DENIED_CODE, approval.message ?? DEFAULT_DENIAL_MESSAGE);
    }
    if (approval?.status === "pending") {
      waiting.push(approval);
      return errorResult(call.id, "approval_expired", APPROVAL_EXPIRED_MESSAGE);
    }
    unknown.push(call);
    return errorResult(call.id, "unknown_outcome", UNKNOWN_OUTCOME_MESSAGE);
  };
  messages.push({ role: "user", content: calls.map(resultOf) });
  return { messages, unknown, denied, waiting };
}

/** What the model and the events are told of a tool call whose result the stopped process never recorded. */
export const UNKNOWN_OUTCOME_MESSAGE = "the server stopped before the tool's result was recorded; it may or may not have run";
