import { pieces, type Reply, type SseEvent, type WireFormat } from "./wire.ts";

/** The Anthropic Messages API (POST /v1/messages). */
export const anthropic: WireFormat = {
  errorBody(type, message) {
    return { type: "error", error: { type, message } };
  },

  whole(reply) {
    return {
      ...head(reply),
      content: blocks(reply),
      stop_reason: reply.stopReason,
      usage: { input_tokens: reply.usage.inputTokens, output_tokens: reply.usage.outputTokens },
    };
  },

  events(reply) {
    return [
      // The real API reports a first output token at the start, and a ping before the content.
      event("message_start", {
        message: { ...head(reply), content: [], stop_reason: null, usage: { input_tokens: reply.usage.inputTokens, output_tokens: 1 } },
      }),
      event("ping", {}),
      ...blocks(reply).flatMap((block, index) => blockEvents(block, index, reply.chunkChars)),
      event("message_delta", { delta: { stop_reason: reply.stopReason, stop_sequence: null }, usage: { output_tokens: reply.usage.outputTokens } }),
      event("message_stop", {}),
    ];
  },
};

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

function head(reply: Reply) {
  return { id: `msg_${reply.id}`, type: "message", role: "assistant", model: reply.model, stop_sequence: null };
}

function blocks(reply: Reply): Block[] {
  const text: Block[] = reply.text === "" ? [] : [{ type: "text", text: reply.text }];
  return [...text, ...reply.toolCalls.map((call): Block => ({ type: "tool_use", ...call }))];
}

/** A block opens empty, grows by deltas, and closes. */
function blockEvents(block: Block, index: number, chunkChars: number): SseEvent[] {
  const [start, deltas] =
    block.type === "text"
      ? [{ type: "text", text: "" }, pieces(block.text, chunkChars).map((text) => ({ type: "text_delta", text }))]
      : [{ ...block, input: {} }, pieces(JSON.stringify(block.input), chunkChars).map((json) => ({ type: "input_json_delta", partial_json: json }))];
  return [
    event("content_block_start", { index, content_block: start }),
    ...deltas.map((delta) => ({ ...event("content_block_delta", { index, delta }), piece: true })),
    event("content_block_stop", { index }),
  ];
}

function event(name: string, fields: Record<string, unknown>): SseEvent {
  return { name, data: JSON.stringify({ type: name, ...fields }), piece: false };
}
