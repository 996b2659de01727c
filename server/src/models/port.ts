import type { ToolImage } from "@skillenv/client/mcp";

/**
 * The model port: what the run engine needs from a model provider, in the service's own terms.
 * An adapter translates one request into its provider's wire format, streams the reply, and
 * reports every failure as a ModelError with a stable code. It never logs, and no message it
 * produces carries the API key or the request body.
 */

export interface ModelRequest {
  /** The provider's model name. */
  model: string;
  /** Mark prompt cache breakpoints on the request's stable prefix, where the provider has them (Anthropic). */
  promptCache: boolean;
  /** "" for none. */
  system: string;
  messages: ConversationMessage[];
  tools: ToolDefinition[];
  maxTokens: number;
  /**
   * Provider parameters given by the caller (temperature, top_p, ...), passed through; reserved
   * keys (model, messages, system, tools, stream, max_tokens) are refused by the caller before
   * this point.
   */
  parameters: Record<string, unknown>;
}

export interface ToolDefinition {
  name: string;
  description: string;
  /** A JSON Schema object describing the tool's input. */
  inputSchema: Record<string, unknown>;
}

/** A message is never changed once it is part of a conversation: adapters remember each one's wire form (wire-json.ts). */
export type ConversationMessage = { role: "user"; content: UserContent[] } | { role: "assistant"; content: AssistantContent[] };

export type UserContent = { type: "text"; text: string } | ToolResultContent;

/**
 * A tool's result. `images` (a returned result's, docs/mcp.md "Content") go to a provider that
 * takes images in tool results in its form (Anthropic's image blocks); another provider's request
 * says in the text that they are not shown.
 */
export type ToolResultContent = { type: "tool_result"; toolCallId: string; output: string; isError: boolean; images?: ToolImage[] };

/** The text of a tool result for a provider that takes no images in tool results: theirs noted, not shown. */
export function toolResultText(result: ToolResultContent, provider: string): string {
  const count = result.images?.length ?? 0;
  if (count === 0) return result.output;
  return `${result.output}\n[${count} image${count === 1 ? "" : "s"} of this result not shown: ${provider} takes no images in tool results here]`;
}

export type AssistantContent = { type: "text"; text: string } | { type: "tool_call"; id: string; name: string; input: unknown } | ProviderBlock;

/**
 * A block of a provider's reply that the service does not interpret (Anthropic's thinking,
 * redacted thinking and server tool blocks; OpenAI's reasoning items with their encrypted
 * content), kept as the provider sent it, so that it goes back to that provider exactly
 * (Anthropic requires a tool-use cycle's thinking blocks, signatures and all, in the next
 * request; OpenAI's Responses API the reasoning items that led to its function calls). Other
 * providers never see it.
 */
export type ProviderBlock = { type: "provider_block"; provider: string; block: Record<string, unknown> };

export interface ModelResponse {
  content: AssistantContent[];
  stopReason: StopReason;
  usage: Usage;
}

/** Tokens a call used. The cache counts are part of `inputTokens`, and present only when the provider reported them. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input written to the provider's prompt cache (Anthropic). */
  cacheCreationInputTokens?: number;
  /** Input read from the provider's prompt cache. */
  cacheReadInputTokens?: number;
  /** Output spent on reasoning the reply does not show (OpenAI), part of `outputTokens`. */
  reasoningTokens?: number;
}

/** Adds `usage` to `total`, in place. */
export function addUsage(total: Usage, usage: Usage): void {
  total.inputTokens += usage.inputTokens;
  total.outputTokens += usage.outputTokens;
  if (usage.cacheCreationInputTokens !== undefined) total.cacheCreationInputTokens = (total.cacheCreationInputTokens ?? 0) + usage.cacheCreationInputTokens;
  if (usage.cacheReadInputTokens !== undefined) total.cacheReadInputTokens = (total.cacheReadInputTokens ?? 0) + usage.cacheReadInputTokens;
  if (usage.reasoningTokens !== undefined) total.reasoningTokens = (total.reasoningTokens ?? 0) + usage.reasoningTokens;
}

export type StopReason = "end_turn" | "tool_use" | "max_tokens" | "stop_sequence" | "refusal" | "other";

export interface ModelCallOptions {
  /** Sent in the provider's auth header and nowhere else. */
  apiKey: string;
  /** Aborting ends the call (and its HTTP request) with model_cancelled. */
  signal: AbortSignal;
  /** Called with each piece of reply text as it streams in, in order. */
  onTextDelta?: (text: string) => void;
  /**
   * Called with the usage the provider has reported so far, whenever it reports more (Anthropic
   * reports input tokens as the stream starts), so that a call that is cancelled or breaks off
   * still counts what the provider has said it used.
   */
  onUsage?: (usage: ModelResponse["usage"]) => void;
  /**
   * Nothing is sent before this resolves: the request is prepared meanwhile (its body built, a
   * connection taken from the pool or opened), so that it goes out in one write once it may. If
   * it rejects, nothing is sent and the call fails.
   */
  sendAfter?: Promise<unknown>;
  /**
   * When the caller stops waiting (epoch ms; a run's turn bound). A provider that asks to be
   * retried later than that (retry-after) fails the call at once instead of being waited for.
   */
  deadlineMs?: number;
}

export interface ModelProvider {
  readonly name: string;
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse>;
}

/**
 * Every ModelError code, and whether trying the same call again later may succeed. Adapters
 * retry the retryable ones themselves (up to their configured count) before a reply starts.
 */
const RETRYABLE = {
  model_auth_failed: false,
  model_rate_limited: true,
  model_overloaded: true,
  /** The provider refused the request itself (HTTP 4xx other than auth and rate limits). */
  model_rejected: false,
  /** Network failures and HTTP 5xx, including a stream cut off before its end. */
  model_unavailable: true,
  /** The provider answered something that is not its documented wire format. */
  model_invalid_response: false,
  /** The call outlived its time bound (SERVICE_MODEL_TIMEOUT_SECS). */
  model_timeout: true,
  /** The caller's signal aborted the call. */
  model_cancelled: false,
} as const satisfies Record<string, boolean>;

export type ModelErrorCode = keyof typeof RETRYABLE;

export class ModelError extends Error {
  override name = "ModelError";
  readonly code: ModelErrorCode;
  /** The provider's HTTP status, when it answered with one. */
  readonly status: number | undefined;
  readonly retryable: boolean;
  /** Machine-readable details, e.g. `retryAfterSecs` of a rate limit. */
  readonly details: Readonly<Record<string, string>>;

  constructor(code: ModelErrorCode, message: string, status?: number, details: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.status = status;
    this.retryable = RETRYABLE[code];
    this.details = details;
  }
}
