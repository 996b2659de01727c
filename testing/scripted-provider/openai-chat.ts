import { pieces, type Reply, type SseEvent, type WireFormat } from "./wire.ts";

/** OpenAI Chat Completions (POST /chat/completions or /v1/chat/completions). */
export const openaiChat: WireFormat = {
  errorBody(type, message) {
    return { error: { message, type, param: null, code: null } };
  },

  whole(reply) {
    const message = { role: "assistant", content: reply.text === "" ? null : reply.text, refusal: null, ...toolCalls(reply) };
    return { ...head(reply, "chat.completion"), choices: [{ index: 0, message, finish_reason: finishReason(reply), logprobs: null }], usage: usage(reply) };
  },

  events(reply, request) {
    const includeUsage = (request.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    return [
      chunk(reply, { role: "assistant", content: "" }),
      ...pieces(reply.text, reply.chunkChars).map((content) => ({ ...chunk(reply, { content }), piece: true })),
      ...reply.toolCalls.flatMap((call, index) => [
        chunk(reply, { tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }),
        ...pieces(JSON.stringify(call.input), reply.chunkChars).map((json) => ({
          ...chunk(reply, { tool_calls: [{ index, function: { arguments: json } }] }),
          piece: true,
        })),
      ]),
      chunk(reply, {}, finishReason(reply)),
      ...(includeUsage ? [sse({ ...head(reply, "chat.completion.chunk"), choices: [], usage: usage(reply) })] : []),
      { data: "[DONE]", piece: false },
    ];
  },
};

/** Step stop reasons are in Anthropic's words. */
const FINISH_REASONS = new Map([
  ["end_turn", "stop"],
  ["stop_sequence", "stop"],
  ["tool_use", "tool_calls"],
  ["max_tokens", "length"],
  ["refusal", "content_filter"],
]);

function finishReason(reply: Reply): string {
  return FINISH_REASONS.get(reply.stopReason) ?? reply.stopReason;
}

function head(reply: Reply, object: string) {
  return { id: `chatcmpl-${reply.id}`, object, created: Math.floor(Date.now() / 1000), model: reply.model };
}

function toolCalls(reply: Reply) {
  if (reply.toolCalls.length === 0) return {};
  return {
    tool_calls: reply.toolCalls.map((call) => ({ id: call.id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.input) } })),
  };
}

function usage(reply: Reply) {
  const { inputTokens, outputTokens } = reply.usage;
  return { prompt_tokens: inputTokens, completion_tokens: outputTokens, total_tokens: inputTokens + outputTokens };
}

function chunk(reply: Reply, delta: Record<string, unknown>, finish: string | null = null): SseEvent {
  return sse({ ...head(reply, "chat.completion.chunk"), choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] });
}

function sse(data: unknown): SseEvent {
  return { data: JSON.stringify(data), piece: false };
}
