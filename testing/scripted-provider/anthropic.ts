import { createHash } from "node:crypto";
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
      usage: { ...inputUsage(reply), output_tokens: reply.usage.outputTokens },
    };
  },

  events(reply) {
    return [
      // The real API reports a first output token at the start, and a ping before the content.
      event("message_start", {
        message: { ...head(reply), content: [], stop_reason: null, usage: { ...inputUsage(reply), output_tokens: 1 } },
      }),
      event("ping", {}),
      ...blocks(reply).flatMap((block, index) => blockEvents(block, index, reply.chunkChars)),
      event("message_delta", { delta: { stop_reason: reply.stopReason, stop_sequence: null }, usage: { output_tokens: reply.usage.outputTokens } }),
      event("message_stop", {}),
    ];
  },

  /**
   * With thinking enabled, the last assistant message, when it called tools, must start with the
   * thinking block that led to them, its signature intact (the Messages API's rule for extended
   * thinking with tool use).
   */
  refusal(request) {
    if ((request.thinking as { type?: unknown } | undefined)?.type !== "enabled") return undefined;
    const messages = Array.isArray(request.messages) ? (request.messages as Array<{ role?: unknown; content?: unknown }>) : [];
    const index = messages.findLastIndex((message) => message.role === "assistant");
    const content = Array.isArray(messages[index]?.content) ? (messages[index]!.content as Array<Record<string, unknown>>) : [];
    if (!content.some((block) => block.type === "tool_use")) return undefined;
    const first = content[0]!;
    if (first.type !== "thinking" && first.type !== "redacted_thinking") {
      return `messages.${index}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(first.type)}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`;
    }
    if (first.type === "thinking" && first.signature !== signatureOf(String(first.thinking)))
      return `messages.${index}.content.0: Invalid \`signature\` in \`thinking\` block`;
    return undefined;
  },
};

/** Input as the Messages API counts it: the uncached tokens, and the cache's own counts when the script gives them. */
function inputUsage(reply: Reply): Record<string, number> {
  const { inputTokens, cacheCreationInputTokens, cacheReadInputTokens } = reply.usage;
  return {
    input_tokens: inputTokens,
    ...(cacheCreationInputTokens === undefined ? {} : { cache_creation_input_tokens: cacheCreationInputTokens }),
    ...(cacheReadInputTokens === undefined ? {} : { cache_read_input_tokens: cacheReadInputTokens }),
  };
}

/** A stand-in for the API's signature: any change to the thinking text invalidates it. */
function signatureOf(thinking: string): string {
  return `sig_${createHash("sha256").update(thinking).digest("base64")}`;
}

type Block =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: unknown };

function head(reply: Reply) {
  return { id: `msg_${reply.id}`, type: "message", role: "assistant", model: reply.model, stop_sequence: null };
}

function blocks(reply: Reply): Block[] {
  const thinking: Block[] = reply.thinking === "" ? [] : [{ type: "thinking", thinking: reply.thinking, signature: signatureOf(reply.thinking) }];
  const text: Block[] = reply.text === "" ? [] : [{ type: "text", text: reply.text }];
  return [...thinking, ...text, ...reply.toolCalls.map((call): Block => ({ type: "tool_use", ...call }))];
}

/** A block opens empty, grows by deltas, and closes. */
function blockEvents(block: Block, index: number, chunkChars: number): SseEvent[] {
  const [start, deltas] =
    block.type === "thinking"
      ? [
          { type: "thinking", thinking: "" },
          [
            ...pieces(block.thinking, chunkChars).map((thinking) => ({ type: "thinking_delta", thinking })),
            { type: "signature_delta", signature: block.signature },
          ],
        ]
      : block.type === "text"
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
