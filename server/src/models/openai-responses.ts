import type {
  AssistantContent,
  ConversationMessage,
  ModelCallOptions,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  StopReason,
  ToolDefinition,
  Usage,
} from "./port.ts";
import type { ToolResultContent } from "./port.ts";
import { finishContent, type ContentDraft, type ProviderBlockDraft } from "./reply.ts";
import { cutOff, eventJson, streamedFailure, streamEvents, type ProviderOptions, type ServerSentEvent } from "./transport.ts";
import { WireMessages } from "./wire-json.ts";

/**
 * The OpenAI Responses API (POST {baseUrl}/responses), always streamed, and stateless: nothing is
 * stored at OpenAI (`store: false`), each request carries the whole conversation, and the
 * reasoning items of a reply come back with their encrypted content, to be sent again exactly in
 * the next request, as reasoning models need across a tool-use cycle:
 * https://platform.openai.com/docs/api-reference/responses-streaming
 * https://platform.openai.com/docs/guides/reasoning (keeping reasoning items in context)
 */
const NAME = "openai";
/** Asks for each reasoning item's encrypted content, the only form of it a stateless request can send back. */
const ENCRYPTED_REASONING = "reasoning.encrypted_content";

export function createOpenAIResponsesProvider(options: ProviderOptions): ModelProvider {
  return {
    name: NAME,
    async complete(request, call) {
      const headers = { "content-type": "application/json", authorization: `Bearer ${call.apiKey}` };
      const events = streamEvents({ provider: NAME, url: `${options.baseUrl}/responses`, headers, body: responsesBody(request) }, options, call);
      return readReply(events, call, options.maxJsonDepth);
    },
  };
}

/**
 * The caller's parameters come first, so the request's own fields always win: `instructions`
 * is the system prompt (left out when empty, a caller's as well), `store` is always false (the
 * service keeps the conversation, and a run's input never stays at OpenAI), and `include` adds
 * the encrypted reasoning to whatever else the caller asked to include.
 */
function responsesBody(request: ModelRequest): string {
  const include = Array.isArray(request.parameters.include) ? request.parameters.include : [];
  const fields = {
    ...request.parameters,
    model: request.model,
    instructions: request.system === "" ? undefined : request.system,
    max_output_tokens: request.maxTokens,
    ...(request.tools.length === 0 ? {} : { tools: request.tools.map(wireTool) }),
    store: false,
    include: include.includes(ENCRYPTED_REASONING) ? include : [...include, ENCRYPTED_REASONING],
    stream: true,
  };
  return wire.body(fields, request.messages);
}

const wire = new WireMessages(wireItems, "input");

/**
 * A message becomes input items. A user turn's tool results (`function_call_output`, matched by
 * `call_id`) go before its text, right after the calls they answer; the API has no error flag
 * for them: an error's output must say so itself. An assistant turn's parts stay in their order,
 * its reasoning items exactly as they came; another provider's blocks mean nothing here.
 */
function wireItems(message: ConversationMessage): Array<Record<string, unknown>> {
  if (message.role === "assistant") return message.content.flatMap(assistantItem);
  const results = [];
  const texts = [];
  for (const block of message.content) {
    if (block.type === "tool_result") results.push({ type: "function_call_output", call_id: block.toolCallId, output: functionCallOutput(block) });
    else texts.push({ type: "input_text", text: block.text });
  }
  return texts.length === 0 ? results : [...results, { role: "user", content: texts }];
}

function assistantItem(part: AssistantContent): Array<Record<string, unknown>> {
  switch (part.type) {
    case "text":
      return [{ role: "assistant", content: part.text }];
    case "tool_call":
      return [{ type: "function_call", call_id: part.id, name: part.name, arguments: JSON.stringify(part.input) }];
    case "provider_block":
      return part.provider === NAME ? [part.block] : [];
  }
}

/** Strict mode (the API's default for function tools) would refuse any input schema that is not written for it. */
function wireTool(tool: ToolDefinition): Record<string, unknown> {
  return { type: "function", name: tool.name, description: tool.description, parameters: tool.inputSchema, strict: false };
}

/** The fields of the stream's events that the port needs; any of them may be missing from a malformed reply. */
interface WireEvent {
  type?: string;
  output_index?: number;
  summary_index?: number;
  item?: WireItem;
  delta?: string;
  arguments?: string;
  response?: WireResponse;
  /** An `error` event's: flat, or nested in `error` as OpenAI itself sends it. */
  code?: string | null;
  message?: string;
  error?: WireError | null;
}

type WireItem = { type?: string; call_id?: string; name?: string; arguments?: string; content?: unknown } & Record<string, unknown>;

interface WireResponse {
  usage?: WireUsage | null;
  incomplete_details?: { reason?: string } | null;
  error?: WireError | null;
}

interface WireError {
  type?: string;
  code?: string | null;
  message?: string;
}

interface WireUsage {
  input_tokens?: number;
  input_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  output_tokens?: number;
  output_tokens_details?: { reasoning_tokens?: number } | null;
}

/** `response.incomplete`'s reasons; a completed response has none, and ends the turn or asks for tools. */
const INCOMPLETE_REASONS = new Map<string, StopReason>([
  ["max_output_tokens", "max_tokens"],
  ["content_filter", "refusal"],
]);

async function readReply(
  events: AsyncIterable<ServerSentEvent>,
  { onTextDelta, onUsage, apiKey }: Pick<ModelCallOptions, "onTextDelta" | "onUsage" | "apiKey">,
  maxJsonDepth: number,
): Promise<ModelResponse> {
  /** Keyed by output index; the reply's content is their finished forms in that order. */
  const drafts = new Map<number | undefined, ContentDraft>();
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let refused = false;
  for await (const message of events) {
    const event = eventJson(message, NAME) as WireEvent;
    switch (event.type) {
      case "response.output_item.added":
        if (event.item) drafts.set(event.output_index, startItem(event.item));
        break;
      case "response.output_text.delta":
      case "response.refusal.delta": {
        const draft = drafts.get(event.output_index);
        if (draft?.type !== "text" || typeof event.delta !== "string") break;
        draft.text += event.delta;
        onTextDelta?.(event.delta);
        refused ||= event.type === "response.refusal.delta";
        break;
      }
      case "response.function_call_arguments.delta": {
        const draft = drafts.get(event.output_index);
        if (draft?.type === "tool_call" && typeof event.delta === "string") draft.json += event.delta;
        break;
      }
      case "response.function_call_arguments.done": {
        const draft = drafts.get(event.output_index);
        if (draft?.type === "tool_call" && typeof event.arguments === "string") draft.json = event.arguments;
        break;
      }
      case "response.reasoning_summary_text.delta": {
        const draft = drafts.get(event.output_index);
        if (draft?.type === "provider_block" && typeof event.delta === "string") addSummaryText(draft, event.summary_index ?? 0, event.delta);
        break;
      }
      case "response.output_item.done":
        if (event.item) finishItem(drafts, event.output_index, event.item, onTextDelta);
        break;
      case "response.completed":
      case "response.incomplete": {
        readUsage(usage, event.response?.usage);
        onUsage?.({ ...usage });
        const stopReason = stopReasonOf(event, drafts.values(), refused);
        return { content: finishContent(drafts.values(), stopReason, NAME, maxJsonDepth), stopReason, usage };
      }
      case "response.failed":
        readUsage(usage, event.response?.usage);
        onUsage?.({ ...usage });
        throw streamedFailure(NAME, event.response?.error?.code ?? event.response?.error?.type, event.response?.error?.message, apiKey);
      case "error":
        // Nested in `error`, as OpenAI sends it, or flat, as the published event schema has it.
        throw streamedFailure(NAME, event.error?.code ?? event.error?.type ?? event.code, event.error?.message ?? event.message, apiKey);
      // response.created, .in_progress, content and summary parts, .done events of text already
      // streamed, and event types added later carry nothing the port needs.
    }
  }
  throw cutOff(NAME);
}

/** An output item as it opens: a message's text, a function call, or an item kept whole (reasoning). */
function startItem(item: WireItem): ContentDraft {
  if (item.type === "message") return { type: "text", text: "" };
  if (item.type === "function_call") {
    return { type: "tool_call", id: String(item.call_id ?? ""), name: String(item.name ?? ""), json: typeof item.arguments === "string" ? item.arguments : "" };
  }
  return { type: "provider_block", block: { ...item }, json: "" };
}

/**
 * An output item's done event carries it complete, and for a reasoning item it is the only
 * complete form: its encrypted content may be partial while it streams. A message keeps the text
 * that streamed (the deltas the caller saw), unless none did.
 */
function finishItem(
  drafts: Map<number | undefined, ContentDraft>,
  index: number | undefined,
  item: WireItem,
  onTextDelta: ((text: string) => void) | undefined,
): void {
  const draft = drafts.get(index) ?? startItem(item);
  drafts.set(index, draft);
  if (draft.type === "text") {
    const text = outputText(item.content);
    if (draft.text === "" && text !== "") {
      draft.text = text;
      onTextDelta?.(text);
    }
  } else if (draft.type === "tool_call") {
    if (typeof item.call_id === "string" && item.call_id !== "") draft.id = item.call_id;
    if (typeof item.name === "string" && item.name !== "") draft.name = item.name;
    if (typeof item.arguments === "string") draft.json = item.arguments;
  } else {
    draft.block = { ...item };
  }
}

function outputText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .map((part: { type?: unknown; text?: unknown } | null) => (part?.type === "output_text" && typeof part.text === "string" ? part.text : ""))
    .join("");
}

/** Summary parts a reasoning item may stream; an index beyond is not one the service keeps. */
const MAX_SUMMARY_PARTS = 256;

/** A reasoning summary as it streams, should the item's done event never come. */
function addSummaryText(draft: ProviderBlockDraft, index: number, delta: string): void {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_SUMMARY_PARTS) return;
  const summary = Array.isArray(draft.block.summary) ? [...(draft.block.summary as Array<{ type: string; text: string }>)] : [];
  for (let at = summary.length; at <= index; at++) summary.push({ type: "summary_text", text: "" });
  summary[index] = { ...summary[index]!, text: `${summary[index]!.text ?? ""}${delta}` };
  draft.block.summary = summary;
}

/** The Responses API has no finish reason: a completed reply with function calls asks for tools. */
function stopReasonOf(event: WireEvent, drafts: Iterable<ContentDraft>, refused: boolean): StopReason {
  if (event.type === "response.incomplete") return INCOMPLETE_REASONS.get(event.response?.incomplete_details?.reason ?? "") ?? "other";
  if ([...drafts].some((draft) => draft.type === "tool_call")) return "tool_use";
  return refused ? "refusal" : "end_turn";
}

/** Usage comes once, with the response's last event. Cached input is part of input_tokens, reasoning part of output_tokens. */
function readUsage(usage: Usage, wire: WireUsage | null | undefined): void {
  if (typeof wire?.input_tokens === "number") usage.inputTokens = wire.input_tokens;
  if (typeof wire?.output_tokens === "number") usage.outputTokens = wire.output_tokens;
  const cached = wire?.input_tokens_details?.cached_tokens;
  if (typeof cached === "number") usage.cacheReadInputTokens = cached;
  const written = wire?.input_tokens_details?.cache_write_tokens;
  if (typeof written === "number") usage.cacheCreationInputTokens = written;
  const reasoning = wire?.output_tokens_details?.reasoning_tokens;
  if (typeof reasoning === "number") usage.reasoningTokens = reasoning;
}

/** A tool result's output: its text, or with images, a list of its text and each image as a data URL (input_image). */
function functionCallOutput(block: ToolResultContent): string | Array<Record<string, unknown>> {
  if (!block.images?.length) return block.output;
  const images = block.images.map((image) => ({ type: "input_image", image_url: `data:${image.mimeType};base64,${image.data}` }));
  return [{ type: "input_text", text: block.output }, ...images];
}
