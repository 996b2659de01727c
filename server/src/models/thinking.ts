import type { ProviderBlock } from "./port.ts";

/** The model's reasoning as its provider shows it: its text, or only that there was some (`redacted`). */
export interface Thinking {
  text: string;
  redacted?: true;
}

/**
 * What a run shows of a provider block as `assistant.thinking` (docs/events.md); undefined for a
 * block that is not reasoning (a server tool's). Anthropic shows its thinking text, or encrypts it
 * whole (redacted_thinking). OpenAI shows a reasoning item only as a summary, when the request
 * asked for one (`reasoning.summary`); without one, only its encrypted content is there, and the
 * reasoning reads as redacted. Compatible servers that show the reasoning itself (reasoning_text)
 * are shown as they are.
 */
export function thinkingOf({ provider, block }: ProviderBlock): Thinking | undefined {
  if (provider === "anthropic") {
    if (block.type === "thinking") return { text: String(block.thinking ?? "") };
    if (block.type === "redacted_thinking") return { text: "", redacted: true };
  } else if (provider === "openai" && block.type === "reasoning") {
    const text = joinedText(block.summary) || joinedText(block.content);
    return text === "" ? { text: "", redacted: true } : { text };
  }
  return undefined;
}

/** The texts of a reasoning item's summary or content parts, a blank line between parts. */
function joinedText(parts: unknown): string {
  if (!Array.isArray(parts)) return "";
  return parts.flatMap((part: { text?: unknown } | null) => (typeof part?.text === "string" && part.text !== "" ? [part.text] : [])).join("\n\n");
}
