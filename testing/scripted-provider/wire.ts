import type { Step } from "./script.ts";

/** A step made concrete for one request: every default filled in. */
export interface Reply {
  id: string;
  model: string;
  text: string;
  /** Reasoning text (Anthropic's thinking block, OpenAI's reasoning item), "" for none. */
  thinking: string;
  toolCalls: Array<{ id: string; name: string; input: unknown }>;
  /** In Anthropic's words; see Step.stopReason. */
  stopReason: string;
  usage: NonNullable<Step["usage"]>;
  /** Characters per streamed piece of text or tool input. */
  chunkChars: number;
}

export interface SseEvent {
  name?: string;
  data: string;
  /** Carries a piece of text or tool input (Step.chunkDelayMs applies after it). */
  piece: boolean;
}

/** One provider's wire format. */
export interface WireFormat {
  errorBody(type: string, message: string): unknown;
  /** The reply as one JSON body. */
  whole(reply: Reply): unknown;
  /** The reply as server-sent events; `request` is the parsed request body. */
  events(reply: Reply, request: Record<string, unknown>): SseEvent[];
  /** Why the real API would refuse the request, if it would for a reason the stand-in checks. */
  refusal?(request: Record<string, unknown>): string | undefined;
}

let replies = 0;

/** `requestText` is the raw request body, for the default input token count. */
export function replyFor(step: Step, model: string, requestText: string): Reply {
  const n = ++replies;
  const text = step.text ?? "";
  const toolCalls = (step.toolCalls ?? []).map((call, index) => ({ id: call.id ?? `call_${n}_${index}`, name: call.name, input: call.input }));
  // A rough estimate, so that demos show plausible numbers.
  const outputChars = text.length + toolCalls.reduce((sum, call) => sum + JSON.stringify(call.input).length, 0);
  return {
    id: String(n),
    model,
    text,
    thinking: step.thinking ?? "",
    toolCalls,
    stopReason: step.stopReason ?? (toolCalls.length > 0 ? "tool_use" : "end_turn"),
    usage: step.usage ?? { inputTokens: Math.ceil(requestText.length / 4), outputTokens: Math.ceil(outputChars / 4) },
    chunkChars: step.chunkChars ?? Infinity,
  };
}

/** `text` in pieces of `size` characters; none for empty text. */
export function pieces(text: string, size: number): string[] {
  const result: string[] = [];
  for (let start = 0; start < text.length; start += size) result.push(text.slice(start, start + size));
  return result;
}
