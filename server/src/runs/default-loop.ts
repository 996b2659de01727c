import type { AssistantContent, ConversationMessage, ModelResponse, ToolResultContent } from "../models/index.ts";
import { inSpan } from "../tracing/index.ts";

/** What an agent loop may ask of the run (the same services a custom loop reaches through wit/env.wit). */
export interface LoopHost {
  /** One model call with the conversation so far and the run's tools. */
  callModel(messages: ConversationMessage[], round: number): Promise<ModelResponse>;
  /** Runs the tool calls of one reply, concurrently, each wherever its tool is placed. */
  dispatchTools(calls: ToolCall[], round: number): Promise<ToolResult[]>;
}

export type ToolCall = Extract<AssistantContent, { type: "tool_call" }>;
export type ToolResult = ToolResultContent;

export interface LoopInput {
  history: readonly ConversationMessage[];
  message: string;
  maxRounds: number;
  /**
   * Receives what the turn adds to the conversation as it goes (the user's message first), so that
   * a turn that fails keeps what it did. A resumed turn passes what its stopped process had added,
   * ending with the user's message or a round's tool results, and the loop continues from there.
   */
  added: ConversationMessage[];
}

export interface LoopOutcome {
  stopReason: string;
  rounds: number;
  outputText: string;
}

/** The model still asked for tools after the run's last allowed round. */
export class MaxRoundsExceeded extends Error {
  override name = "MaxRoundsExceeded";
}

/**
 * The service's default agent loop: call the model with the conversation and the tools, run
 * every tool call of the reply, feed the results back, and repeat until the model ends the turn.
 * Tool failures and unknown outcomes reach the model as error results; nothing is retried.
 * It runs natively in the service (trusted code, no guest to instantiate): see docs/runs.md.
 */
export async function defaultAgentLoop(host: LoopHost, { history, message, maxRounds, added }: LoopInput): Promise<LoopOutcome> {
  if (added.length === 0) added.push({ role: "user", content: [{ type: "text", text: message }] });
  // Each reply was a round: a resumed turn's next model call is the round after its last reply.
  const replies = added.filter((entry) => entry.role === "assistant").length;
  for (let round = replies + 1; round <= maxRounds; round++) {
    // A round is a span: its model call, then its tool calls.
    const outcome = await inSpan("run round", { "skillenv.run.round": round }, async (span): Promise<LoopOutcome | undefined> => {
      const reply = await host.callModel([...history, ...added], round);
      added.push({ role: "assistant", content: reply.content });
      const calls = reply.content.filter((part): part is ToolCall => part.type === "tool_call");
      span.setAttribute("skillenv.run.tool_calls", calls.length);
      if (calls.length === 0) return { stopReason: reply.stopReason, rounds: round, outputText: textOf(reply.content) };
      added.push({ role: "user", content: await host.dispatchTools(calls, round) });
      return undefined;
    });
    if (outcome) return outcome;
  }
  throw new MaxRoundsExceeded(`the model still asked for tools after ${maxRounds} rounds`);
}

export function textOf(content: readonly AssistantContent[]): string {
  return content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/**
 * What of a turn may stay in the conversation: everything but a trailing assistant message
 * whose tool calls never got results (providers refuse such a history).
 */
export function consistentPrefix(added: readonly ConversationMessage[]): ConversationMessage[] {
  const last = added.at(-1);
  const dangling = last?.role === "assistant" && last.content.some((part) => part.type === "tool_call");
  return dangling ? added.slice(0, -1) : [...added];
}
