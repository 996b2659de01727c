import type { ConversationMessage } from "../models/index.ts";
import { prefixEnd, type Table, type WriteOp } from "../storage/index.ts";
import type { ToolResult } from "./default-loop.ts";
import type { RunRecord } from "./records.ts";

/** A running run's counters, as its record holds them. */
export type TurnCounters = Pick<RunRecord, "rounds" | "toolCalls" | "usage">;

/** One row of a turn's log: its counters, a message it added, or one tool result of a round in progress. */
export type TurnLogEntry = { counters: TurnCounters } | { message: ConversationMessage } | { result: ToolResult };

/** What a turn had done when its process stopped, read back from its log. */
export interface LoggedTurn {
  counters: TurnCounters | undefined;
  /** The messages the turn added, in order: the user's message, then each reply and its tool results. */
  messages: ConversationMessage[];
  /** Results of the last reply's tool calls that had come back, by call id. */
  results: Map<string, ToolResult>;
}

/**
 * What a running turn has done so far, kept beside its events so that a restart can rebuild the
 * run instead of losing it (docs/runs.md, "A run interrupted by a restart"). The turn hands the
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

  constructor(table: Table<TurnLogEntry>, sessionId: string, runId: string) {
    this.#table = table;
    this.#prefix = turnLogPrefix(sessionId, runId);
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

  /** The message that will be `added[index]` (a reply, logged as it is recorded, before the loop adds it). */
  message(index: number, message: ConversationMessage): WriteOp {
    this.#messages = Math.max(this.#messages, index + 1);
    return this.#message(index, message);
  }

  result(result: ToolResult): WriteOp {
    return this.#put(`r/${result.toolCallId}`, { result });
  }

  /** Removes every row this turn wrote (with the run's last event). */
  clearOps(): WriteOp[] {
    return [...this.#written].map((key) => this.#table.deleteOp(key));
  }

  #message(index: number, message: ConversationMessage): WriteOp {
    return this.#put(`m/${String(index).padStart(6, "0")}`, { message });
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
  const logged: LoggedTurn = { counters: undefined, messages: [], results: new Map() };
  const clearOps: WriteOp[] = [];
  // Keys sort as the turn wrote them: counters, m/<index> in order, r/<call id>.
  for (const [key, entry] of await table.entries({ gt: prefix, lt: prefixEnd(prefix) })) {
    clearOps.push(table.deleteOp(key));
    if ("counters" in entry) logged.counters = entry.counters;
    else if ("message" in entry) logged.messages.push(entry.message);
    else logged.results.set(entry.result.toolCallId, entry.result);
  }
  return { logged, clearOps };
}

function turnLogPrefix(sessionId: string, runId: string): string {
  return `${sessionId}/${runId}/`;
}

/**
 * The conversation an interrupted turn keeps: every message it logged and, when its last reply
 * asked for tools, a result for each call: the one that came back, or an error saying the outcome
 * is unknown (the call may have been sent; nothing is sent again), so that the conversation stays
 * one a provider accepts and the model learns what happened.
 */
export function interruptedConversation(logged: LoggedTurn): ConversationMessage[] {
  const messages = [...logged.messages];
  const last = messages.at(-1);
  if (last?.role !== "assistant") return messages;
  const calls = last.content.filter((part) => part.type === "tool_call");
  if (calls.length === 0) return messages;
  const unknown = (id: string): ToolResult => ({
    type: "tool_result",
    toolCallId: id,
    output: JSON.stringify({
      error: { code: "unknown_outcome", message: "the server stopped before the tool's result was recorded; it may or may not have run" },
    }),
    isError: true,
  });
  messages.push({ role: "user", content: calls.map((call) => logged.results.get(call.id) ?? unknown(call.id)) });
  return messages;
}
