import type {
  AssistantContent,
  ModelCallOptions,
  ConversationMessage,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  StopReason,
  ToolDefinition,
  Usage,
  UserContent,
} from "./port.ts";
import { finishContent, type ContentDraft } from "./reply.ts";
import { cutOff, eventJson, streamedFailure, streamEvents, type ProviderOptions, type ServerSentEvent } from "./transport.ts";
import { WireMessages } from "./wire-json.ts";

/**
 * The Anthropic Messages API (POST {baseUrl}/v1/messages), always streamed:
 * https://docs.anthropic.com/en/api/messages-streaming
 */
const NAME = "anthropic";
const API_VERSION = "2023-06-01";

export function createAnthropicProvider(options: ProviderOptions): ModelProvider {
  return {
    name: NAME,
    async complete(request, call) {
      const headers = { "content-type": "application/json", "anthropic-version": API_VERSION, "x-api-key": call.apiKey };
      const events = streamEvents({ provider: NAME, url: `${options.baseUrl}/v1/messages`, headers, body: messagesBody(request) }, options, call);
      return readReply(events, call, options.maxJsonDepth);
    },
  };
}

const wire = new WireMessages((message) => [wireMessage(message)]);

/** The caller's parameters come first, so the request's own fields always win. */
function messagesBody(request: ModelRequest): string {
  const cache = request.promptCache;
  const system = request.system === "" ? {} : { system: cache ? [{ type: "text", text: request.system, cache_control: EPHEMERAL }] : request.system };
  const fields = {
    ...request.parameters,
    model: request.model,
    max_tokens: request.maxTokens,
    ...system,
    ...(request.tools.length === 0 ? {} : { tools: request.tools.map(wireTool) }),
    stream: true,
  };
  return wire.body(fields, request.messages, [], cache ? (message) => [withBreakpoint(wireMessage(message))] : undefined);
}

/** Anthropic's prompt cache, for its default five minutes: a run's rounds come seconds apart. */
const EPHEMERAL = { type: "ephemeral" };

/**
 * Prompt caching (docs/models.md): a breakpoint after the system prompt (with the tools before it,
 * the same for every run of a session) and one on the newest message, so each round reads the
 * conversation so far from the cache and writes only what it adds. The breakpoint goes on the
 * message's last block that may carry one (thinking blocks may not); none when there is none.
 */
function withBreakpoint(message: Record<string, unknown>): Record<string, unknown> {
  const content = message.content as Array<Record<string, unknown>>;
  const index = content.findLastIndex((block) => block.type !== "thinking" && block.type !== "redacted_thinking");
  if (index < 0) return message;
  return { ...message, content: content.map((block, at) => (at === index ? { ...block, cache_control: EPHEMERAL } : block)) };
}

function wireMessage(message: ConversationMessage): Record<string, unknown> {
  const content: Array<UserContent | AssistantContent> = message.content;
  return { role: message.role, content: content.flatMap(wireBlock) };
}

function wireBlock(block: UserContent | AssistantContent): Array<Record<string, unknown>> {
  switch (block.type) {
    case "text":
      return [{ type: "text", text: block.text }];
    case "tool_result": {
      const images = (block.images ?? []).map((image) => ({ type: "image", source: { type: "base64", media_type: image.mimeType, data: image.data } }));
      const content = images.length === 0 ? block.output : [{ type: "text", text: block.output }, ...images];
      return [{ type: "tool_result", tool_use_id: block.toolCallId, content, is_error: block.isError }];
    }
    case "tool_call":
      return [{ type: "tool_use", id: block.id, name: block.name, input: block.input }];
    case "provider_block":
      // Exactly as it came (thinking with its signature); another provider's blocks mean nothing here.
      return block.provider === NAME ? [block.block] : [];
  }
}

function wireTool(tool: ToolDefinition): Record<string, unknown> {
  return { name: tool.name, description: tool.description, input_schema: tool.inputSchema };
}

/** The fields of the stream's events that the port needs; any of them may be missing from a malformed reply. */
interface WireEvent {
  type?: string;
  index?: number;
  message?: { usage?: WireUsage };
  content_block?: { type?: string; text?: string; id?: string; name?: string } & Record<string, unknown>;
  delta?: { type?: string; text?: string; partial_json?: string; thinking?: string; signature?: string; stop_reason?: string | null };
  usage?: WireUsage;
  error?: { type?: string; message?: string };
}

interface WireUsage {
  input_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  output_tokens?: number;
}

const STOP_REASONS = new Map<string, StopReason>([
  ["end_turn", "end_turn"],
  ["tool_use", "tool_use"],
  ["max_tokens", "max_tokens"],
  ["stop_sequence", "stop_sequence"],
  ["refusal", "refusal"],
]);

async function readReply(
  events: AsyncIterable<ServerSentEvent>,
  { onTextDelta, onUsage, apiKey }: Pick<ModelCallOptions, "onTextDelta" | "onUsage" | "apiKey">,
  maxJsonDepth: number,
): Promise<ModelResponse> {
  /** Keyed by block index; blocks the port does not carry (thinking, server tools) have no draft. */
  const drafts = new Map<number | undefined, ContentDraft>();
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let stopReason: StopReason = "other";
  for await (const message of events) {
    const event = eventJson(message, NAME) as WireEvent;
    switch (event.type) {
      case "message_start":
        readUsage(usage, event.message?.usage);
        onUsage?.({ ...usage });
        break;
      case "content_block_start":
        startBlock(drafts, event, onTextDelta);
        break;
      case "content_block_delta":
        applyDelta(drafts.get(event.index), event.delta, onTextDelta);
        break;
      case "message_delta":
        stopReason = STOP_REASONS.get(event.delta?.stop_reason ?? "") ?? "other";
        readUsage(usage, event.usage);
        onUsage?.({ ...usage });
        break;
      case "message_stop":
        return { content: finishContent(drafts.values(), stopReason, NAME, maxJsonDepth), stopReason, usage };
      case "error":
        throw streamedFailure(NAME, event.error?.type, event.error?.message, apiKey);
      // ping, content_block_stop and event types added later carry nothing the port needs.
    }
  }
  throw cutOff(NAME);
}

function startBlock(drafts: Map<number | undefined, ContentDraft>, event: WireEvent, onTextDelta: ((text: string) => void) | undefined): void {
  const block = event.content_block;
  if (block?.type === "text") {
    const text = typeof block.text === "string" ? block.text : "";
    drafts.set(event.index, { type: "text", text });
    if (text !== "") onTextDelta?.(text);
  } else if (block?.type === "tool_use") {
    drafts.set(event.index, { type: "tool_call", id: String(block.id ?? ""), name: String(block.name ?? ""), json: "" });
  } else if (typeof block?.type === "string") {
    // Thinking, redacted thinking, server tool use and results: kept whole, to be sent back as they are.
    drafts.set(event.index, { type: "provider_block", block: { ...block }, json: "" });
  }
}

function applyDelta(draft: ContentDraft | undefined, delta: WireEvent["delta"], onTextDelta: ((text: string) => void) | undefined): void {
  if (draft?.type === "text" && delta?.type === "text_delta" && typeof delta.text === "string") {
    draft.text += delta.text;
    onTextDelta?.(delta.text);
  } else if (draft?.type === "tool_call" && delta?.type === "input_json_delta" && typeof delta.partial_json === "string") {
    draft.json += delta.partial_json;
  } else if (draft?.type === "provider_block") {
    if (delta?.type === "thinking_delta" && typeof delta.thinking === "string") draft.block.thinking = `${draft.block.thinking ?? ""}${delta.thinking}`;
    else if (delta?.type === "signature_delta" && typeof delta.signature === "string")
      draft.block.signature = `${draft.block.signature ?? ""}${delta.signature}`;
    else if (delta?.type === "input_json_delta" && typeof delta.partial_json === "string") draft.json += delta.partial_json;
  }
  // Other deltas (a text block's citations) are skipped.
}

/**
 * Usage counts are cumulative, so each one seen replaces the last. Anthropic counts cached input
 * apart from input_tokens; the port's inputTokens is all the input the model read, as OpenAI counts it.
 */
function readUsage(usage: Usage, wire: WireUsage | undefined): void {
  if (typeof wire?.input_tokens === "number") {
    usage.inputTokens = wire.input_tokens + (wire.cache_creation_input_tokens ?? 0) + (wire.cache_read_input_tokens ?? 0);
  }
  if (typeof wire?.cache_creation_input_tokens === "number") usage.cacheCreationInputTokens = wire.cache_creation_input_tokens;
  if (typeof wire?.cache_read_input_tokens === "number") usage.cacheReadInputTokens = wire.cache_read_input_tokens;
  if (typeof wire?.output_tokens === "number") usage.outputTokens = wire.output_tokens;
}
