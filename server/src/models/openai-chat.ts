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
} from "./port.ts";
import { toolResultText } from "./port.ts";
import { finishContent, type TextDraft, type ToolCallDraft } from "./reply.ts";
import { cutOff, eventJson, streamedFailure, streamEvents, type ProviderOptions, type ServerSentEvent } from "./transport.ts";
import { WireMessages } from "./wire-json.ts";

/**
 * OpenAI Chat Completions (POST {baseUrl}/chat/completions), always streamed:
 * https://platform.openai.com/docs/api-reference/chat-streaming
 */
const NAME = "openai";

export function createOpenAIChatProvider(options: ProviderOptions): ModelProvider {
  return {
    name: NAME,
    async complete(request, call) {
      const headers = { "content-type": "application/json", authorization: `Bearer ${call.apiKey}` };
      const events = streamEvents({ provider: NAME, url: `${options.baseUrl}/chat/completions`, headers, body: chatBody(request) }, options, call);
      return readReply(events, call, options.maxJsonDepth);
    },
  };
}

/**
 * The caller's parameters come first, so the request's own fields always win. max_tokens is
 * deprecated and refused by reasoning models; max_completion_tokens works for every model.
 */
function chatBody(request: ModelRequest): string {
  const system = request.system === "" ? [] : [{ role: "system", content: request.system }];
  const fields = {
    ...request.parameters,
    model: request.model,
    max_completion_tokens: request.maxTokens,
    ...(request.tools.length === 0 ? {} : { tools: request.tools.map(wireTool) }),
    stream: true,
    stream_options: { include_usage: true },
  };
  return wire.body(fields, request.messages, system);
}

const wire = new WireMessages(wireMessages);

/**
 * A tool result is a message of its own (role "tool"), and tool messages must directly follow
 * the assistant message that made the calls, so a user turn's results go before its text.
 * Chat Completions has no error flag for a tool result: an error's output must say so itself.
 */
function wireMessages(message: ConversationMessage): Array<Record<string, unknown>> {
  if (message.role === "assistant") return [assistantMessage(message.content)];
  const results = [];
  const texts = [];
  for (const block of message.content) {
    if (block.type === "tool_result") results.push({ role: "tool", tool_call_id: block.toolCallId, content: toolResultText(block, "OpenAI Chat Completions") });
    else texts.push({ type: "text", text: block.text });
  }
  return texts.length === 0 ? results : [...results, { role: "user", content: texts }];
}

function assistantMessage(content: AssistantContent[]): Record<string, unknown> {
  const text = content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("");
  const calls = content.flatMap((block) =>
    block.type === "tool_call" ? [{ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input) } }] : [],
  );
  // An empty tool_calls array is refused; content is null when the reply was only tool calls.
  return { role: "assistant", content: text === "" ? null : text, ...(calls.length === 0 ? {} : { tool_calls: calls }) };
}

function wireTool(tool: ToolDefinition): Record<string, unknown> {
  return { type: "function", function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } };
}

/** The fields of a chunk that the port needs; any of them may be missing from a malformed reply. */
interface WireChunk {
  choices?: Array<{
    index?: number;
    delta?: { content?: string | null; tool_calls?: WireToolCallDelta[] };
    finish_reason?: string | null;
  }>;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
    completion_tokens_details?: { reasoning_tokens?: number } | null;
  } | null;
  error?: unknown;
}

interface WireToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** "stop" also ends a reply at a stop sequence; the stream does not say which, so it reads as end_turn. */
const STOP_REASONS = new Map<string, StopReason>([
  ["stop", "end_turn"],
  ["tool_calls", "tool_use"],
  ["length", "max_tokens"],
  ["content_filter", "refusal"],
]);

async function readReply(
  events: AsyncIterable<ServerSentEvent>,
  { onTextDelta, onUsage, apiKey }: Pick<ModelCallOptions, "onTextDelta" | "onUsage" | "apiKey">,
  maxJsonDepth: number,
): Promise<ModelResponse> {
  const text: TextDraft = { type: "text", text: "" };
  /** Keyed by the tool call's index in the reply. */
  const calls = new Map<number | undefined, ToolCallDraft>();
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let stopReason: StopReason = "other";
  for await (const event of events) {
    if (event.data === "[DONE]") return { content: finishContent([text, ...calls.values()], stopReason, NAME, maxJsonDepth), stopReason, usage };
    const chunk = eventJson(event, NAME) as WireChunk;
    if (chunk.error !== undefined) {
      const error = chunk.error as { type?: unknown; code?: unknown; message?: unknown } | null;
      throw streamedFailure(NAME, error?.code ?? error?.type, error?.message, apiKey);
    }
    if (chunk.usage) {
      // Chat Completions reports usage once, in a chunk of its own before [DONE].
      if (typeof chunk.usage.prompt_tokens === "number") usage.inputTokens = chunk.usage.prompt_tokens;
      if (typeof chunk.usage.completion_tokens === "number") usage.outputTokens = chunk.usage.completion_tokens;
      // OpenAI caches prompts by itself and says how much it read (part of prompt_tokens).
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
      if (typeof cached === "number") usage.cacheReadInputTokens = cached;
      // Reasoning models say how much of completion_tokens went on reasoning.
      const reasoning = chunk.usage.completion_tokens_details?.reasoning_tokens;
      if (typeof reasoning === "number") usage.reasoningTokens = reasoning;
      onUsage?.({ ...usage });
    }
    // The request asks for one choice; a caller's `n` parameter would add others, which are ignored.
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find((candidate) => candidate?.index === 0) : undefined;
    const content = choice?.delta?.content;
    if (typeof content === "string" && content !== "") {
      text.text += content;
      onTextDelta?.(content);
    }
    const toolCalls = choice?.delta?.tool_calls;
    if (Array.isArray(toolCalls)) for (const delta of toolCalls) applyToolCallDelta(calls, delta);
    if (typeof choice?.finish_reason === "string") stopReason = STOP_REASONS.get(choice.finish_reason) ?? "other";
  }
  throw cutOff(NAME);
}

/** The first delta of a call carries its id and name; later ones carry pieces of the arguments. */
function applyToolCallDelta(calls: Map<number | undefined, ToolCallDraft>, delta: WireToolCallDelta | null): void {
  let draft = calls.get(delta?.index);
  if (draft === undefined) {
    draft = { type: "tool_call", id: "", name: "", json: "" };
    calls.set(delta?.index, draft);
  }
  if (typeof delta?.id === "string" && delta.id !== "") draft.id = delta.id;
  if (typeof delta?.function?.name === "string" && delta.function.name !== "") draft.name = delta.function.name;
  if (typeof delta?.function?.arguments === "string") draft.json += delta.function.arguments;
}
