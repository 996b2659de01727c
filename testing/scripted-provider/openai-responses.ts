import { randomBytes } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { openaiChat } from "./openai-chat.ts";
import { pieces, type Reply, type SseEvent, type WireFormat } from "./wire.ts";

type Item = Record<string, unknown>;

/**
 * The OpenAI Responses API (POST /responses or /v1/responses), shaped like its documented
 * streaming events. A step's `thinking` becomes a reasoning item (its summary only when the
 * request asks for one with `reasoning.summary`, its encrypted content only when `include` asks
 * for `reasoning.encrypted_content`). Like the real API used statelessly (`store: false`), it
 * refuses a request whose input holds a function call without the reasoning item that came with
 * it, or that item changed in any way: each provider remembers the reasoning items it issued.
 */
export function openaiResponses(): WireFormat {
  /** Reasoning items as issued, by id. */
  const issued = new Map<string, Item>();
  /** The reasoning item each function call came with, by model and call id (scripts reuse call ids). */
  const reasoningOf = new Map<string, string>();
  const callKey = (model: unknown, callId: unknown) => `${String(model)}\n${String(callId)}`;

  /** The reply's output items, complete; reasoning is remembered with the calls it led to. */
  function outputOf(reply: Reply, request: Record<string, unknown>): Item[] {
    const output: Item[] = [];
    if (reply.thinking !== "") {
      const item = reasoningItem(reply, request);
      issued.set(String(item.id), item);
      for (const call of reply.toolCalls) reasoningOf.set(callKey(reply.model, call.id), String(item.id));
      output.push(item);
    }
    if (reply.text !== "") output.push(messageItem(reply, reply.text));
    output.push(...reply.toolCalls.map((call, index) => functionCallItem(reply, index, call, JSON.stringify(call.input))));
    return output;
  }

  return {
    // OpenAI's error format is the same for both its APIs.
    errorBody: openaiChat.errorBody,

    whole(reply) {
      return response(reply, outputOf(reply, {}), "completed");
    },

    events(reply, request) {
      const output = outputOf(reply, request);
      const events: Array<Omit<SseEvent, "data"> & { data: Item }> = [];
      const add = (type: string, fields: Item, piece = false) => events.push({ name: type, data: { type, ...fields }, piece });
      const started = response(reply, [], "in_progress");
      add("response.created", { response: started });
      add("response.in_progress", { response: started });
      for (const [index, item] of output.entries()) {
        const at = { output_index: index };
        const ids = { item_id: item.id, output_index: index };
        if (item.type === "reasoning") {
          // The encrypted content of an item in progress may be incomplete (the SDK's documentation).
          const encrypted = typeof item.encrypted_content === "string" ? { encrypted_content: item.encrypted_content.slice(0, 8) } : {};
          add("response.output_item.added", { ...at, item: { id: item.id, type: "reasoning", summary: [], ...encrypted } });
          for (const [summaryIndex, part] of (item.summary as Array<{ text: string }>).entries()) {
            const summary = { ...ids, summary_index: summaryIndex };
            add("response.reasoning_summary_part.added", { ...summary, part: { type: "summary_text", text: "" } });
            for (const delta of pieces(part.text, reply.chunkChars)) add("response.reasoning_summary_text.delta", { ...summary, delta }, true);
            add("response.reasoning_summary_text.done", { ...summary, text: part.text });
            add("response.reasoning_summary_part.done", { ...summary, part: { type: "summary_text", text: part.text } });
          }
        } else if (item.type === "message") {
          add("response.output_item.added", { ...at, item: { ...item, status: "in_progress", content: [] } });
          const part = { ...ids, content_index: 0 };
          add("response.content_part.added", { ...part, part: { type: "output_text", text: "", annotations: [] } });
          for (const delta of pieces(reply.text, reply.chunkChars)) add("response.output_text.delta", { ...part, delta, logprobs: [] }, true);
          add("response.output_text.done", { ...part, text: reply.text, logprobs: [] });
          add("response.content_part.done", { ...part, part: { type: "output_text", text: reply.text, annotations: [] } });
        } else {
          add("response.output_item.added", { ...at, item: { ...item, status: "in_progress", arguments: "" } });
          for (const delta of pieces(String(item.arguments), reply.chunkChars)) add("response.function_call_arguments.delta", { ...ids, delta }, true);
          add("response.function_call_arguments.done", { ...ids, name: item.name, arguments: item.arguments });
        }
        add("response.output_item.done", { ...at, item });
      }
      const [status, terminal] = ending(reply);
      add(terminal, { response: response(reply, output, status) });
      return events.map((event, sequence) => ({ ...event, data: JSON.stringify({ ...event.data, sequence_number: sequence }) }));
    },

    /**
     * What the API refuses of a stateless request's input (its own messages, adapted): a
     * function call's output without the call, a function call without the reasoning item it
     * came with (placed before it), and a reasoning item not exactly as issued, or without its
     * encrypted content when nothing is stored.
     */
    refusal(request) {
      const input = Array.isArray(request.input) ? (request.input as Item[]) : [];
      const seen = new Set<unknown>();
      for (const [index, item] of input.entries()) {
        if (item?.type === "reasoning") {
          const original = issued.get(String(item.id));
          if (original === undefined) return `Item with id '${String(item.id)}' not found.`;
          if (request.store === false && typeof item.encrypted_content !== "string") {
            return `Item with id '${String(item.id)}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`;
          }
          if (!isDeepStrictEqual(item, original))
            return `input[${index}]: the reasoning item ${String(item.id)} differs from the one issued; its encrypted content could not be verified.`;
        } else if (item?.type === "function_call") {
          const reasoning = reasoningOf.get(callKey(request.model, item.call_id));
          if (reasoning !== undefined && !seen.has(reasoning)) {
            return `Item with call_id '${String(item.call_id)}' of type 'function_call' was provided without its required 'reasoning' item: '${reasoning}'.`;
          }
        } else if (item?.type === "function_call_output" && !seen.has(item.call_id)) {
          return `No tool call found for function call output with call_id ${String(item.call_id)}.`;
        }
        seen.add(item?.type === "reasoning" ? item.id : item?.call_id);
      }
      return undefined;
    },
  };
}

/** The reasoning item a step's `thinking` stands for. */
function reasoningItem(reply: Reply, request: Record<string, unknown>): Item {
  const summarised = (request.reasoning as { summary?: unknown } | undefined)?.summary !== undefined;
  const encrypted = Array.isArray(request.include) && request.include.includes("reasoning.encrypted_content");
  return {
    id: `rs_${reply.id}`,
    type: "reasoning",
    summary: summarised ? [{ type: "summary_text", text: reply.thinking }] : [],
    // Opaque, and different every time: only the issued bytes pass.
    ...(encrypted ? { encrypted_content: `gAAAAA${randomBytes(48).toString("base64")}` } : {}),
  };
}

function messageItem(reply: Reply, text: string): Item {
  return { id: `msg_${reply.id}`, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] };
}

function functionCallItem(reply: Reply, index: number, call: Reply["toolCalls"][number], json: string): Item {
  return { id: `fc_${reply.id}_${index}`, type: "function_call", status: "completed", call_id: call.id, name: call.name, arguments: json };
}

/**
 * Step stop reasons are in Anthropic's words. The API has no finish reason: a response completes
 * (with function calls or not), or is incomplete for a reason.
 */
function ending(reply: Reply): ["completed" | "incomplete", string] {
  return ["end_turn", "tool_use", "stop_sequence"].includes(reply.stopReason) ? ["completed", "response.completed"] : ["incomplete", "response.incomplete"];
}

const INCOMPLETE_REASONS = new Map([
  ["max_tokens", "max_output_tokens"],
  ["refusal", "content_filter"],
]);

function response(reply: Reply, output: Item[], status: "in_progress" | "completed" | "incomplete"): Item {
  const { inputTokens, outputTokens, cacheCreationInputTokens, cacheReadInputTokens, reasoningTokens } = reply.usage;
  // Input as OpenAI counts it: all of it, cached or not.
  const input = inputTokens + (cacheCreationInputTokens ?? 0) + (cacheReadInputTokens ?? 0);
  const usage = {
    input_tokens: input,
    input_tokens_details: {
      cached_tokens: cacheReadInputTokens ?? 0,
      ...(cacheCreationInputTokens === undefined ? {} : { cache_write_tokens: cacheCreationInputTokens }),
    },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens ?? 0 },
    total_tokens: input + outputTokens,
  };
  const reason = INCOMPLETE_REASONS.get(reply.stopReason) ?? reply.stopReason;
  return {
    id: `resp_${reply.id}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    error: null,
    incomplete_details: status === "incomplete" ? { reason } : null,
    model: reply.model,
    output,
    store: false,
    usage: status === "in_progress" ? null : usage,
  };
}
