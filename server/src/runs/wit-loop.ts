// The JSON a custom agent loop exchanges with its host (wit/env.wit, docs/wit.md), converted to
// and from the run engine's own conversation types. Version 1:
//   call-model     {"v":1,"messages":[{"role":"user","content":string}
//                                     | {"role":"assistant","content":string,"tool_calls"?:[{"id","name","input"}],"blocks"?:[...]}
//                                     | {"role":"tool","tool_call_id","content":string,"is_error"?:bool}]}
//               -> {"v":1,"message":{"content":string,"tool_calls":[{"id","name","input"}],"blocks"?:[...]},"stop_reason"}
//   A reply with blocks the service does not interpret (thinking, reasoning items) carries all of
//   its content, in order, as `blocks`: {"type":"text","text"} | {"type":"tool_call","id","name","input"}
//   | {"type":"provider_block","provider","block"}. An assistant message given back with `blocks`
//   is that content (its `content` and `tool_calls` are then ignored), so a loop that keeps the
//   messages as it got them sends the provider what it requires back.
//   dispatch-tools {"v":1,"calls":[{"id","name","input"}]}
//               -> {"v":1,"results":[{"id","output"} | {"id","error":{"code","message"}}]}
import type { AssistantContent, ConversationMessage, ModelResponse, UserContent } from "../models/index.ts";
import { textOf, type ToolCall, type ToolResult } from "./default-loop.ts";

/** A host call the guest got wrong: reaches the guest as this failure. */
export function invalidHostRequest(message: string): { code: string; message: string } {
  return { code: "invalid_input", message };
}

export function parseHostRequest(text: string): Record<string, unknown> {
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch {
    throw invalidHostRequest("the host request is not JSON");
  }
  if (typeof request !== "object" || request === null || (request as { v?: unknown }).v !== 1) throw invalidHostRequest('expected {"v":1,...}');
  return request as Record<string, unknown>;
}

/** The loop's messages as the run engine's conversation. Consecutive tool results become one user message. */
export function conversationFromWit(messages: unknown): ConversationMessage[] {
  if (!Array.isArray(messages)) throw invalidHostRequest("messages must be an array");
  const conversation: ConversationMessage[] = [];
  for (const message of messages as Array<Record<string, unknown>>) {
    if (message?.role === "tool") {
      const result: UserContent = {
        type: "tool_result",
        toolCallId: String(message.tool_call_id ?? ""),
        output: String(message.content ?? ""),
        isError: message.is_error === true,
      };
      const last = conversation.at(-1);
      if (last?.role === "user" && last.content.every((part) => part.type === "tool_result")) last.content.push(result);
      else conversation.push({ role: "user", content: [result] });
    } else if (message?.role === "assistant") {
      if (message.blocks !== undefined) {
        conversation.push({ role: "assistant", content: blocksFromWit(message.blocks) });
        continue;
      }
      const content: AssistantContent[] = typeof message.content === "string" && message.content !== "" ? [{ type: "text", text: message.content }] : [];
      content.push(...callsFromWit(message.tool_calls ?? []));
      conversation.push({ role: "assistant", content });
    } else if (message?.role === "user") {
      conversation.push({ role: "user", content: [{ type: "text", text: String(message.content ?? "") }] });
    } else {
      throw invalidHostRequest('every message needs a role: "user", "assistant" or "tool"');
    }
  }
  return conversation;
}

export function callsFromWit(calls: unknown): ToolCall[] {
  if (!Array.isArray(calls)) throw invalidHostRequest("calls must be an array");
  return (calls as Array<Record<string, unknown>>).map((call) => {
    if (typeof call?.id !== "string" || typeof call.name !== "string") throw invalidHostRequest("every call needs an id and a name");
    return { type: "tool_call", id: call.id, name: call.name, input: call.input ?? {} };
  });
}

/** An assistant message's content as a loop gave it back in `blocks`: text, tool calls and provider blocks, in order. */
function blocksFromWit(blocks: unknown): AssistantContent[] {
  if (!Array.isArray(blocks)) throw invalidHostRequest("an assistant message's blocks must be an array");
  return (blocks as Array<Record<string, unknown>>).map((block): AssistantContent => {
    switch (block?.type) {
      case "text":
        if (typeof block.text !== "string") throw invalidHostRequest("a text block needs its text");
        return { type: "text", text: block.text };
      case "tool_call":
        return callsFromWit([block])[0]!;
      case "provider_block":
        if (typeof block.provider !== "string" || typeof block.block !== "object" || block.block === null || Array.isArray(block.block))
          throw invalidHostRequest("a provider block needs its provider and its block (an object)");
        return { type: "provider_block", provider: block.provider, block: block.block as Record<string, unknown> };
      default:
        throw invalidHostRequest('every block is of type "text", "tool_call" or "provider_block"');
    }
  });
}

export function replyToWit(reply: ModelResponse): object {
  const calls = reply.content.filter((part): part is ToolCall => part.type === "tool_call");
  const message: Record<string, unknown> = { content: textOf(reply.content), tool_calls: calls.map(({ id, name, input }) => ({ id, name, input })) };
  // Only a reply with blocks the service does not interpret needs them given back whole.
  if (reply.content.some((part) => part.type === "provider_block")) message.blocks = reply.content.map(blockToWit);
  return { v: 1, message, stop_reason: reply.stopReason };
}

function blockToWit(part: AssistantContent): object {
  switch (part.type) {
    case "text":
      return { type: "text", text: part.text };
    case "tool_call":
      return { type: "tool_call", id: part.id, name: part.name, input: part.input };
    case "provider_block":
      return { type: "provider_block", provider: part.provider, block: part.block };
  }
}

export function resultsToWit(results: readonly ToolResult[]): object {
  return {
    v: 1,
    results: results.map(({ toolCallId, output, isError }) => {
      const value = parseJson(output);
      return isError
        ? { id: toolCallId, error: (value as { error?: unknown }).error ?? { code: "tool_error", message: output } }
        : { id: toolCallId, output: value };
    }),
  };
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
