/** One reply of a script: what the next request for its model is answered with. */
export interface Step {
  text?: string;
  toolCalls?: Array<{ id?: string; name: string; input: unknown }>;
  /**
   * In Anthropic's words (end_turn, tool_use, max_tokens, stop_sequence, refusal), translated
   * for OpenAI; any other value is sent as it is. Default: tool_use with tool calls, else end_turn.
   */
  stopReason?: string;
  /**
   * Default: about one token per four characters of the request and of the reply. `inputTokens`
   * is the uncached input, as the Messages API counts it; the OpenAI Responses format adds the
   * cache counts to it, and reports them and `reasoningTokens` (part of `outputTokens`) as its
   * details. Chat Completions sends neither.
   */
  usage?: { inputTokens: number; outputTokens: number; cacheCreationInputTokens?: number; cacheReadInputTokens?: number; reasoningTokens?: number };
  /**
   * Reasoning sent first. Anthropic: a thinking block with a signature; a request with thinking
   * enabled must send it back unmodified with the tool calls it led to, or is refused. OpenAI
   * Responses: a reasoning item, with this text as its summary when the request asks for one
   * and encrypted content when it includes it; a request must send the item back exactly, before
   * the function calls it led to, or is refused. Chat Completions: nothing.
   */
  thinking?: string;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Stream text and tool input in pieces of this many characters; default: one piece each. */
  chunkChars?: number;
  /** Wait this long after each streamed piece. */
  chunkDelayMs?: number;
  /** Answer this HTTP error, in the provider's error format, instead of a reply; with a `retry-after` header when `retryAfterSecs` is set. */
  error?: { status: number; type: string; message: string; retryAfterSecs?: number };
  /** Answer 200 with exactly this body, in the content type the request expects, instead of a reply. */
  rawBody?: string;
  /** Close the connection halfway through the streamed reply (or instead of a whole one). */
  drop?: boolean;
}

export interface Script {
  steps: Step[];
  /** Start again from the first step once the last is played, for benchmarks. */
  loop?: boolean;
}

const STEP_FIELDS = new Set(["text", "thinking", "toolCalls", "stopReason", "usage", "delayMs", "chunkChars", "chunkDelayMs", "error", "rawBody", "drop"]);

/** Checks the shape of a script from JSON (a file, the control endpoint); unknown step fields are refused, so a typo is not silently ignored. */
export function parseScript(value: unknown): Script {
  if (!isObject(value) || !Array.isArray(value.steps) || !["undefined", "boolean"].includes(typeof value.loop)) {
    throw new Error('a script is {"steps": [...], "loop"?: boolean}');
  }
  value.steps.forEach((step: unknown, index: number) => {
    if (!isObject(step)) throw new Error(`step ${index} is not an object`);
    const unknown = Object.keys(step).filter((field) => !STEP_FIELDS.has(field));
    if (unknown.length > 0) throw new Error(`step ${index} has unknown fields: ${unknown.join(", ")}`);
  });
  return value as unknown as Script;
}

/** A script file: {"<model>": {"steps": [...], "loop"?: boolean}, ...}. */
export function parseScripts(value: unknown): Record<string, Script> {
  if (!isObject(value)) throw new Error('a script file is {"<model>": {"steps": [...]}, ...}');
  return Object.fromEntries(Object.entries(value).map(([model, script]) => [model, parseScript(script)]));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The loaded scripts and how far each has been played. */
export class ScriptBook {
  readonly #scripts = new Map<string, { script: Script; next: number }>();

  /** Replaces the model's script and starts it from its first step. */
  load(model: string, script: Script): void {
    this.#scripts.set(model, { script, next: 0 });
  }

  /** The step that answers the next request for `model`, or why there is none. */
  take(model: string): { step: Step } | { problem: string } {
    const played = this.#scripts.get(model);
    if (played === undefined) return { problem: `scripted provider: no script for model ${JSON.stringify(model)}` };
    const { steps, loop } = played.script;
    const step = steps[played.next];
    if (step === undefined) return { problem: `scripted provider: the script for model ${JSON.stringify(model)} is exhausted (${steps.length} steps)` };
    played.next = loop ? (played.next + 1) % steps.length : played.next + 1;
    return { step };
  }
}
