import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import OpenAI from "openai";
import { startScriptedProvider, type RecordedRequest, type ScriptedProvider, type Step } from "../../testing/scripted-provider/index.ts";
import { loadSettings } from "../src/config/index.ts";
import {
  createAnthropicProvider,
  createModelProviders,
  createOpenAIChatProvider,
  createOpenAIResponsesProvider,
  ModelError,
  thinkingOf,
  type ConversationMessage,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ProviderOptions,
} from "../src/models/index.ts";

const KEY = "sk-test-0123456789abcdef";

let scripted: ScriptedProvider;
beforeAll(async () => {
  scripted = await startScriptedProvider();
});
afterAll(() => scripted.close());

let models = 0;
/** A fresh model name with its script loaded, so tests never share a script. */
function model(steps: Step[], loop = false): string {
  const name = `model-${++models}`;
  scripted.script(name, steps, { loop });
  return name;
}

function requestsFor(name: string): RecordedRequest[] {
  return scripted.requests.filter((request) => request.body.model === name);
}

function request(name: string, fields: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: name,
    system: "",
    messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
    tools: [],
    maxTokens: 1024,
    parameters: {},
    promptCache: false,
    ...fields,
  };
}

interface Outcome {
  response: ModelResponse;
  deltas: string[];
}

async function complete(provider: ModelProvider, modelRequest: ModelRequest, signal = new AbortController().signal): Promise<Outcome> {
  const deltas: string[] = [];
  const response = await provider.complete(modelRequest, { apiKey: KEY, signal, onTextDelta: (text) => deltas.push(text) });
  return { response, deltas };
}

/** The ModelError a call fails with; no error message may ever carry the key. */
async function failure(call: Promise<unknown>): Promise<ModelError> {
  const error = await call.then(
    () => new Error("expected the call to fail"),
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(ModelError);
  expect((error as Error).message).not.toContain(KEY);
  return error as ModelError;
}

interface AdapterCase {
  name: string;
  create(options?: Partial<ProviderOptions>): ModelProvider;
  /** How the adapter reports each step stop reason (they are in Anthropic's words). */
  stopReasons: Record<string, ModelResponse["stopReason"]>;
  /** What the adapter's usage adds to the input and output tokens when the provider reports nothing else. */
  usageDetails?: Partial<ModelResponse["usage"]>;
}

const adapters: AdapterCase[] = [
  {
    name: "anthropic",
    create: (options) =>
      createAnthropicProvider({ baseUrl: scripted.anthropicBaseUrl, maxRetries: 0, timeoutMs: 60_000, retryBaseDelayMs: 1, maxJsonDepth: 32, ...options }),
    stopReasons: {
      end_turn: "end_turn",
      tool_use: "tool_use",
      max_tokens: "max_tokens",
      stop_sequence: "stop_sequence",
      refusal: "refusal",
      pause_turn: "other",
    },
  },
  {
    name: "openai",
    create: (options) =>
      createOpenAIChatProvider({ baseUrl: scripted.openaiBaseUrl, maxRetries: 0, timeoutMs: 60_000, retryBaseDelayMs: 1, maxJsonDepth: 32, ...options }),
    // Chat Completions says "stop" for a stop sequence too.
    stopReasons: { end_turn: "end_turn", tool_use: "tool_use", max_tokens: "max_tokens", stop_sequence: "end_turn", refusal: "refusal", pause_turn: "other" },
  },
  {
    name: "openai-responses",
    create: (options) =>
      createOpenAIResponsesProvider({ baseUrl: scripted.openaiBaseUrl, maxRetries: 0, timeoutMs: 60_000, retryBaseDelayMs: 1, maxJsonDepth: 32, ...options }),
    // A response completes or is incomplete for a reason: it asks for tools exactly when it holds function calls.
    stopReasons: { end_turn: "end_turn", tool_use: "end_turn", max_tokens: "max_tokens", stop_sequence: "end_turn", refusal: "refusal", pause_turn: "other" },
    // The Responses API always details its usage.
    usageDetails: { cacheReadInputTokens: 0, reasoningTokens: 0 },
  },
];

/** A conversation with every kind of content: text, two tool calls, their results (one an error), more text. */
const conversation: ConversationMessage[] = [
  { role: "user", content: [{ type: "text", text: "What is the weather in Paris and Oslo?" }] },
  {
    role: "assistant",
    content: [
      { type: "text", text: "Let me look." },
      { type: "tool_call", id: "call_a", name: "weather", input: { city: "Paris" } },
      { type: "tool_call", id: "call_b", name: "weather", input: { city: "Oslo" } },
    ],
  },
  {
    role: "user",
    content: [
      { type: "tool_result", toolCallId: "call_a", output: '{"celsius":21}', isError: false },
      { type: "tool_result", toolCallId: "call_b", output: "station offline", isError: true },
      { type: "text", text: "Thanks." },
    ],
  },
];

const weatherTool = {
  name: "weather",
  description: "Current weather of a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

describe.each(adapters)("the $name adapter", (adapter) => {
  it("streams text: the deltas arrive in order and join to the reply's text", async () => {
    const { response, deltas } = await complete(adapter.create(), request(model([{ text: "The quick brown fox jumps", chunkChars: 3 }])));
    expect(deltas).toEqual(["The", " qu", "ick", " br", "own", " fo", "x j", "ump", "s"]);
    expect(response.content).toEqual([{ type: "text", text: "The quick brown fox jumps" }]);
    expect(response.stopReason).toBe("end_turn");
  });

  it("assembles several tool calls of one reply from their streamed pieces and parses their inputs", async () => {
    const toolCalls = [
      { id: "call_1", name: "weather", input: { city: "Paris", units: ["c", "f"] } },
      { id: "call_2", name: "weather", input: { city: "Oslo" } },
      { id: "call_3", name: "clock", input: {} },
    ];
    const { response } = await complete(adapter.create(), request(model([{ text: "Checking.", toolCalls, chunkChars: 4 }])));
    expect(response.content).toEqual([{ type: "text", text: "Checking." }, ...toolCalls.map((call) => ({ type: "tool_call", ...call }))]);
    expect(response.stopReason).toBe("tool_use");
  });

  it("reports the usage the provider counted", async () => {
    const { response } = await complete(adapter.create(), request(model([{ text: "ok", usage: { inputTokens: 1234, outputTokens: 56 } }])));
    expect(response.usage).toEqual({ inputTokens: 1234, outputTokens: 56, ...adapter.usageDetails });
  });

  it("maps every stop reason", async () => {
    for (const [stopReason, expected] of Object.entries(adapter.stopReasons)) {
      const { response } = await complete(adapter.create(), request(model([{ text: "ok", stopReason }])));
      expect(response.stopReason, stopReason).toBe(expected);
    }
  });

  it("sends the key in the auth header only, and the system prompt, tools, parameters and token bound in the body", async () => {
    const name = model([{ text: "ok" }]);
    await complete(adapter.create(), request(name, { system: "Be brief.", tools: [weatherTool], maxTokens: 77, parameters: { temperature: 0.2 } }));
    const [sent] = requestsFor(name);
    expect(JSON.stringify(sent!.body)).not.toContain(KEY);
    if (adapter.name === "anthropic") {
      expect(sent!.headers["x-api-key"]).toBe(KEY);
      expect(sent!.headers["anthropic-version"]).toBe("2023-06-01");
      expect(sent!.body).toEqual({
        model: name,
        system: "Be brief.",
        max_tokens: 77,
        temperature: 0.2,
        stream: true,
        messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
        tools: [{ name: "weather", description: weatherTool.description, input_schema: weatherTool.inputSchema }],
      });
    } else if (adapter.name === "openai-responses") {
      expect(sent!.path).toBe("/v1/responses");
      expect(sent!.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(sent!.body).toEqual({
        model: name,
        instructions: "Be brief.",
        max_output_tokens: 77,
        temperature: 0.2,
        store: false,
        include: ["reasoning.encrypted_content"],
        stream: true,
        input: [{ role: "user", content: [{ type: "input_text", text: "Hi" }] }],
        tools: [{ type: "function", name: "weather", description: weatherTool.description, parameters: weatherTool.inputSchema, strict: false }],
      });
    } else {
      expect(sent!.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(sent!.body).toEqual({
        model: name,
        max_completion_tokens: 77,
        temperature: 0.2,
        stream: true,
        stream_options: { include_usage: true },
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: [{ type: "text", text: "Hi" }] },
        ],
        tools: [{ type: "function", function: { name: "weather", description: weatherTool.description, parameters: weatherTool.inputSchema } }],
      });
    }
  });

  it("sends tool calls and tool results back in the provider's wire shape", async () => {
    const name = model([{ text: "Paris is warm; Oslo's station is offline." }]);
    await complete(adapter.create(), request(name, { messages: conversation }));
    const { messages, input } = requestsFor(name)[0]!.body;
    if (adapter.name === "openai-responses") {
      expect(input).toEqual([
        { role: "user", content: [{ type: "input_text", text: "What is the weather in Paris and Oslo?" }] },
        { role: "assistant", content: "Let me look." },
        { type: "function_call", call_id: "call_a", name: "weather", arguments: '{"city":"Paris"}' },
        { type: "function_call", call_id: "call_b", name: "weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", call_id: "call_a", output: '{"celsius":21}' },
        { type: "function_call_output", call_id: "call_b", output: "station offline" },
        { role: "user", content: [{ type: "input_text", text: "Thanks." }] },
      ]);
    } else if (adapter.name === "anthropic") {
      expect(messages).toEqual([
        { role: "user", content: [{ type: "text", text: "What is the weather in Paris and Oslo?" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Let me look." },
            { type: "tool_use", id: "call_a", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "call_b", name: "weather", input: { city: "Oslo" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "call_a", content: '{"celsius":21}', is_error: false },
            { type: "tool_result", tool_use_id: "call_b", content: "station offline", is_error: true },
            { type: "text", text: "Thanks." },
          ],
        },
      ]);
    } else {
      expect(messages).toEqual([
        { role: "user", content: [{ type: "text", text: "What is the weather in Paris and Oslo?" }] },
        {
          role: "assistant",
          content: "Let me look.",
          tool_calls: [
            { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
            { id: "call_b", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_a", content: '{"celsius":21}' },
        { role: "tool", tool_call_id: "call_b", content: "station offline" },
        { role: "user", content: [{ type: "text", text: "Thanks." }] },
      ]);
    }
  });

  it.each([
    { status: 401, code: "model_auth_failed", retryable: false },
    { status: 403, code: "model_auth_failed", retryable: false },
    { status: 400, code: "model_rejected", retryable: false },
    { status: 429, code: "model_rate_limited", retryable: true },
    { status: 529, code: "model_overloaded", retryable: true },
    { status: 503, code: "model_overloaded", retryable: true },
    { status: 500, code: "model_unavailable", retryable: true },
  ])("maps HTTP $status to $code", async ({ status, code, retryable }) => {
    const step = { error: { status, type: "some_error", message: "the provider's explanation" } };
    const error = await failure(complete(adapter.create(), request(model([step]))));
    expect(error).toMatchObject({ code, status, retryable });
    // The provider's own words help with everything but a refused key, whose message may quote the key.
    if (status === 401 || status === 403) expect(error.message).not.toContain("explanation");
    else expect(error.message).toContain("the provider's explanation");
  });

  it("never puts the key into an error message, even when the provider echoes it", async () => {
    const echo = `invalid key ${KEY} for this model`;
    for (const status of [400, 401, 429, 500]) {
      const error = await failure(complete(adapter.create(), request(model([{ error: { status, type: "some_error", message: echo } }]))));
      expect(error.status).toBe(status);
    }
  });

  it("refuses a garbage body as model_invalid_response", async () => {
    const notJson = await failure(complete(adapter.create(), request(model([{ rawBody: "data: {this is not json\n\n" }]))));
    expect(notJson.code).toBe("model_invalid_response");
    const notEvents = await failure(complete(adapter.create(), request(model([{ rawBody: "<html><body>Gateway says hello</body></html>\n\n" }]))));
    expect(notEvents.code).toBe("model_invalid_response");
  });

  it("fails with model_unavailable when the connection drops mid-stream", async () => {
    const deltas: string[] = [];
    const call = adapter.create().complete(request(model([{ text: "a reply that never ends", chunkChars: 1, drop: true }])), {
      apiKey: KEY,
      signal: new AbortController().signal,
      onTextDelta: (text) => deltas.push(text),
    });
    const error = await failure(call);
    expect(error).toMatchObject({ code: "model_unavailable", retryable: true });
    expect(deltas.length).toBeGreaterThan(0);
  });

  it("fails with model_unavailable when the provider cannot be reached", async () => {
    const port = await closedPort();
    const error = await failure(complete(adapter.create({ baseUrl: `http://127.0.0.1:${port}` }), request("any")));
    expect(error).toMatchObject({ code: "model_unavailable", retryable: true });
  });

  it("retries a retryable failure up to the configured count", async () => {
    const overloaded = { error: { status: 529, type: "overloaded_error", message: "Overloaded" } };
    const retried = model([overloaded, { text: "made it" }]);
    const { response } = await complete(adapter.create({ maxRetries: 1 }), request(retried));
    expect(response.content).toEqual([{ type: "text", text: "made it" }]);
    expect(requestsFor(retried)).toHaveLength(2);

    const notRetried = model([overloaded, { text: "never seen" }]);
    expect((await failure(complete(adapter.create({ maxRetries: 0 }), request(notRetried)))).code).toBe("model_overloaded");
    expect(requestsFor(notRetried)).toHaveLength(1);
  });

  it("retries a stream cut right after its headers, before any event: the reply had not started", async () => {
    const cut = model([{ rawBody: "" }, { text: "made it" }]);
    const { response } = await complete(adapter.create({ maxRetries: 1 }), request(cut));
    expect(response.content).toEqual([{ type: "text", text: "made it" }]);
    expect(requestsFor(cut)).toHaveLength(2);

    const notRetried = model([{ rawBody: "" }, { text: "never seen" }]);
    expect((await failure(complete(adapter.create({ maxRetries: 0 }), request(notRetried)))).code).toBe("model_unavailable");
    expect(requestsFor(notRetried)).toHaveLength(1);
  });

  it("does not retry a request the provider refused", async () => {
    const name = model([{ error: { status: 400, type: "invalid_request_error", message: "bad" } }, { text: "never seen" }]);
    expect((await failure(complete(adapter.create({ maxRetries: 2 }), request(name)))).code).toBe("model_rejected");
    expect(requestsFor(name)).toHaveLength(1);
  });

  it("ends the call with model_cancelled when the caller aborts mid-stream", async () => {
    const controller = new AbortController();
    const deltas: string[] = [];
    const call = adapter.create().complete(request(model([{ text: "ab", chunkChars: 1, chunkDelayMs: 600_000 }])), {
      apiKey: KEY,
      signal: controller.signal,
      onTextDelta: (text) => {
        deltas.push(text);
        controller.abort();
      },
    });
    expect((await failure(call)).code).toBe("model_cancelled");
    expect(deltas).toEqual(["a"]);
  });

  it("sends nothing before sendAfter resolves, and nothing at all when it rejects", async () => {
    const name = model([{ text: "late" }, { text: "never" }]);
    let send!: () => void;
    const sendAfter = new Promise<void>((resolve) => (send = resolve));
    const call = adapter.create().complete(request(name), { apiKey: KEY, signal: new AbortController().signal, sendAfter });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requestsFor(name)).toHaveLength(0);
    send();
    expect((await call).content).toEqual([{ type: "text", text: "late" }]);

    const refused = adapter
      .create()
      .complete(request(name), { apiKey: KEY, signal: new AbortController().signal, sendAfter: Promise.reject(new Error("not recorded")) });
    expect((await failure(refused)).code).toBe("model_unavailable");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requestsFor(name)).toHaveLength(1);
  });

  it("ends the call with model_timeout when the reply outlives the time bound", async () => {
    const error = await failure(complete(adapter.create({ timeoutMs: 50 }), request(model([{ text: "late", delayMs: 600_000 }]))));
    expect(error).toMatchObject({ code: "model_timeout", retryable: true });
  });

  it("relays the scripted provider's complaint when a script is exhausted", async () => {
    const name = model([{ text: "only one" }]);
    await complete(adapter.create(), request(name));
    const error = await failure(complete(adapter.create(), request(name)));
    expect(error.code).toBe("model_rejected");
    expect(error.message).toContain("exhausted");
  });
});

describe("the openai adapter reading the stream", () => {
  it("reports the prompt tokens OpenAI read from its cache", async () => {
    const provider = createOpenAIChatProvider({ baseUrl: scripted.openaiBaseUrl, maxRetries: 0, timeoutMs: 60_000, maxJsonDepth: 32 });
    const chunk = (fields: object) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", ...fields })}\n\n`;
    const body = [
      chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] }),
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
      chunk({ choices: [], usage: { prompt_tokens: 1200, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 1024 } } }),
      "data: [DONE]\n\n",
    ].join("");
    const { response } = await complete(provider, request(model([{ rawBody: body }])));
    expect(response.usage).toEqual({ inputTokens: 1200, outputTokens: 2, cacheReadInputTokens: 1024 });
  });

  it("carries the provider's message of an error that breaks the stream off", async () => {
    const provider = createOpenAIChatProvider({ baseUrl: scripted.openaiBaseUrl, maxRetries: 0, timeoutMs: 60_000, maxJsonDepth: 32 });
    const body = [
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null }] })}\n\n`,
      `data: ${JSON.stringify({ error: { message: "The server had an error while processing your request.", type: "server_error" } })}\n\n`,
    ].join("");
    const error = await failure(complete(provider, request(model([{ rawBody: body }]))));
    expect(error).toMatchObject({ code: "model_unavailable" });
    expect(error.message).toContain("The server had an error while processing your request.");
  });
});

describe("the openai responses adapter", () => {
  const provider = (options: Partial<ProviderOptions> = {}) =>
    createOpenAIResponsesProvider({ baseUrl: scripted.openaiBaseUrl, maxRetries: 0, timeoutMs: 60_000, retryBaseDelayMs: 1, maxJsonDepth: 32, ...options });
  const sse = (...events: object[]) => events.map((event) => `event: ${(event as { type: string }).type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
  const created = { type: "response.created", sequence_number: 0, response: { id: "resp_1", object: "response", status: "in_progress", output: [] } };
  const message = { type: "response.output_item.added", output_index: 0, item: { id: "msg_1", type: "message", role: "assistant", content: [] } };
  const delta = (text: string) => ({ type: "response.output_text.delta", item_id: "msg_1", output_index: 0, content_index: 0, delta: text });
  /** Asks for reasoning summaries, as a caller does through a run's model parameters. */
  const summarised = { reasoning: { effort: "low", summary: "auto" } };

  it("streams what the official openai SDK's Responses parser accepts, reasoning item and function call included", async () => {
    // The stand-in's streams are shaped from the SDK's types; here the SDK itself reads one.
    const name = model([{ thinking: "Look it up first.", toolCalls: [{ id: "call_sdk", name: "weather", input: { city: "Oslo" } }], chunkChars: 5 }]);
    const client = new OpenAI({ apiKey: KEY, baseURL: scripted.openaiBaseUrl, maxRetries: 0 });
    const response = await client.responses
      .stream({ model: name, input: "Weather in Oslo?", store: false, include: ["reasoning.encrypted_content"], reasoning: { summary: "auto" } })
      .finalResponse();
    const [reasoning, call] = response.output;
    expect(reasoning).toMatchObject({
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Look it up first." }],
      encrypted_content: expect.stringMatching(/^gAAAAA/),
    });
    expect(call).toMatchObject({ type: "function_call", call_id: "call_sdk", name: "weather", arguments: '{"city":"Oslo"}' });
    // And what the SDK assembled is what the service's adapter keeps for the next round.
    const ours = await complete(
      provider(),
      request(model([{ thinking: "Look it up first.", toolCalls: [{ id: "call_sdk", name: "weather", input: { city: "Oslo" } }], chunkChars: 5 }]), {
        tools: [weatherTool],
        parameters: summarised,
      }),
    );
    const kept = ours.response.content[0] as { block: Record<string, unknown> };
    expect({ ...kept.block, encrypted_content: "" }).toEqual({
      ...(reasoning as unknown as Record<string, unknown>),
      id: kept.block.id,
      encrypted_content: "",
    });
  });

  it("carries a reply's reasoning item, encrypted content and all, into the next round exactly", async () => {
    const name = model([
      { thinking: "Paris first, then answer.", toolCalls: [{ id: "call_paris", name: "weather", input: { city: "Paris" } }], chunkChars: 6 },
      { thinking: "It is warm.", text: "21 degrees in Paris." },
    ]);
    const question: ConversationMessage = { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] };
    const first = await complete(provider(), request(name, { messages: [question], tools: [weatherTool], parameters: summarised }));
    expect(first.response.stopReason).toBe("tool_use");
    const [reasoning, call] = first.response.content;
    expect(call).toEqual({ type: "tool_call", id: "call_paris", name: "weather", input: { city: "Paris" } });
    // The item as the done event carried it: its encrypted content complete (the added event's was cut).
    expect(reasoning).toEqual({
      type: "provider_block",
      provider: "openai",
      block: {
        id: expect.stringMatching(/^rs_/),
        type: "reasoning",
        summary: [{ type: "summary_text", text: "Paris first, then answer." }],
        encrypted_content: expect.stringMatching(/^gAAAAA.{60}/),
      },
    });
    expect(thinkingOf(reasoning as Extract<typeof reasoning, { type: "provider_block" }>)).toEqual({ text: "Paris first, then answer." });

    const replied: ConversationMessage[] = [
      question,
      { role: "assistant", content: first.response.content },
      { role: "user", content: [{ type: "tool_result", toolCallId: "call_paris", output: '{"celsius":21}', isError: false }] },
    ];
    // The stand-in refuses a round 2 whose input lacks the reasoning item, or changed it, as the API does.
    const second = await complete(provider(), request(name, { messages: replied, tools: [weatherTool], parameters: summarised }));
    expect(second.response.content.at(-1)).toEqual({ type: "text", text: "21 degrees in Paris." });
    const input = requestsFor(name)[1]!.body.input as unknown[];
    expect(input.slice(1, 3)).toEqual([
      (reasoning as { block: unknown }).block,
      { type: "function_call", call_id: "call_paris", name: "weather", arguments: '{"city":"Paris"}' },
    ]);
  });

  it("is refused by the stand-in when round 2 drops the reasoning item or changes it", async () => {
    const steps = [{ thinking: "Look it up.", toolCalls: [{ id: "call_oslo", name: "weather", input: { city: "Oslo" } }] }, { text: "never sent" }];
    const name = model(steps);
    const question: ConversationMessage = { role: "user", content: [{ type: "text", text: "Weather in Oslo?" }] };
    const { response } = await complete(provider(), request(name, { messages: [question], tools: [weatherTool] }));
    const [reasoning, call] = response.content as [Extract<(typeof response.content)[number], { type: "provider_block" }>, unknown];
    const result: ConversationMessage = { role: "user", content: [{ type: "tool_result", toolCallId: "call_oslo", output: "{}", isError: false }] };
    const round2 = (content: typeof response.content) =>
      complete(provider(), request(name, { messages: [question, { role: "assistant", content }, result], tools: [weatherTool] }));

    const dropped = await failure(round2([call as (typeof response.content)[number]]));
    expect(dropped.code).toBe("model_rejected");
    expect(dropped.message).toContain("without its required 'reasoning' item");
    const tampered = { ...reasoning, block: { ...reasoning.block, encrypted_content: `${String(reasoning.block.encrypted_content)}x` } };
    expect((await failure(round2([tampered, call as (typeof response.content)[number]]))).message).toContain("could not be verified");
    // Without a summary asked for, the reasoning shows only that it happened.
    expect(thinkingOf(reasoning)).toEqual({ text: "", redacted: true });
  });

  it("reports usage with the cached input and the reasoning tokens", async () => {
    const usage = { inputTokens: 100, outputTokens: 40, cacheReadInputTokens: 1024, reasoningTokens: 32 };
    const { response } = await complete(provider(), request(model([{ text: "ok", usage }])));
    expect(response.usage).toEqual({ inputTokens: 1124, outputTokens: 40, cacheReadInputTokens: 1024, reasoningTokens: 32 });
  });

  it("carries the provider's message of an error event or a failed response after the stream started, and does not retry it", async () => {
    const cases = [
      [
        {
          type: "error",
          sequence_number: 3,
          error: { type: "server_error", code: "server_error", message: "The server had an error while processing your request." },
        },
        "model_unavailable",
      ],
      [{ type: "error", sequence_number: 3, code: "invalid_prompt", message: "Invalid prompt: flagged.", param: null }, "model_rejected"],
      [
        {
          type: "response.failed",
          sequence_number: 3,
          response: {
            id: "resp_1",
            status: "failed",
            error: { code: "rate_limit_exceeded", message: `Rate limit reached for your key ${KEY} on tokens per min (TPM)` },
            usage: null,
          },
        },
        "model_rate_limited",
      ],
    ] as const;
    for (const [event, code] of cases) {
      const name = model([{ rawBody: sse(created, message, delta("Hel"), event) }, { text: "never sent" }]);
      const deltas: string[] = [];
      const call = provider({ maxRetries: 2 }).complete(request(name), {
        apiKey: KEY,
        signal: new AbortController().signal,
        onTextDelta: (text) => deltas.push(text),
      });
      const error = await failure(call);
      expect(error.code, JSON.stringify(event)).toBe(code);
      expect(error.message).toContain(("error" in event ? event.error : "response" in event ? event.response.error : event).message.slice(0, 20));
      expect(deltas).toEqual(["Hel"]);
      expect(requestsFor(name)).toHaveLength(1);
    }
  });

  it("drops a function call that max_output_tokens cut off, keeping the text before it", async () => {
    const cut = sse(
      created,
      message,
      delta("Writing the file."),
      { type: "response.output_item.added", output_index: 1, item: { id: "fc_1", type: "function_call", call_id: "call_w", name: "write", arguments: "" } },
      { type: "response.function_call_arguments.delta", item_id: "fc_1", output_index: 1, delta: '{"path": "a.txt", "content": "Once upon' },
      {
        type: "response.incomplete",
        response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, usage: { input_tokens: 9, output_tokens: 4096 } },
      },
    );
    const { response } = await complete(provider(), request(model([{ rawBody: cut }])));
    expect(response).toMatchObject({
      content: [{ type: "text", text: "Writing the file." }],
      stopReason: "max_tokens",
      usage: { inputTokens: 9, outputTokens: 4096 },
    });
  });

  it("keeps what streamed when an item's done event is missing, and the text of a done message that streamed none", async () => {
    const terse = sse(
      created,
      { type: "response.output_item.added", output_index: 0, item: { id: "rs_9", type: "reasoning", summary: [] } },
      { type: "response.reasoning_summary_text.delta", item_id: "rs_9", output_index: 0, summary_index: 0, delta: "Think" },
      { type: "response.reasoning_summary_text.delta", item_id: "rs_9", output_index: 0, summary_index: 0, delta: "ing." },
      { type: "response.reasoning_summary_text.delta", item_id: "rs_9", output_index: 0, summary_index: 1_000_000, delta: "ignored" },
      {
        type: "response.output_item.done",
        output_index: 1,
        item: { id: "msg_9", type: "message", role: "assistant", content: [{ type: "output_text", text: "All at once.", annotations: [] }] },
      },
      { type: "response.completed", response: { status: "completed", usage: { input_tokens: 3, output_tokens: 4 } } },
    );
    const { response, deltas } = await complete(provider(), request(model([{ rawBody: terse }])));
    expect(response.content).toEqual([
      { type: "provider_block", provider: "openai", block: { id: "rs_9", type: "reasoning", summary: [{ type: "summary_text", text: "Thinking." }] } },
      { type: "text", text: "All at once." },
    ]);
    expect(deltas).toEqual(["All at once."]);
  });

  it("streams a refusal as the reply's text and reports it as the stop reason", async () => {
    const refusal = "I can't help with that.";
    const refused = sse(
      created,
      message,
      { type: "response.content_part.added", item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "refusal", refusal: "" } },
      { type: "response.refusal.delta", item_id: "msg_1", output_index: 0, content_index: 0, delta: refusal },
      {
        type: "response.output_item.done",
        output_index: 0,
        item: { id: "msg_1", type: "message", role: "assistant", content: [{ type: "refusal", refusal }] },
      },
      { type: "response.completed", response: { status: "completed", usage: { input_tokens: 5, output_tokens: 7 } } },
    );
    const { response, deltas } = await complete(provider(), request(model([{ rawBody: refused }])));
    expect(response).toMatchObject({ content: [{ type: "text", text: refusal }], stopReason: "refusal" });
    expect(deltas).toEqual([refusal]);
  });

  it("fails with model_unavailable when the stream ends before the response completes", async () => {
    expect((await failure(complete(provider(), request(model([{ rawBody: sse(created, message, delta("Hi")) }]))))).code).toBe("model_unavailable");
  });
});

describe("the anthropic adapter reading the stream", () => {
  const provider = () => createAnthropicProvider({ baseUrl: scripted.anthropicBaseUrl, maxRetries: 0, timeoutMs: 60_000, maxJsonDepth: 32 });
  const sse = (...events: object[]) => events.map((event) => `event: ${(event as { type: string }).type}\ndata: ${JSON.stringify(event)}\n\n`).join("");
  const start = {
    type: "message_start",
    message: { usage: { input_tokens: 10, cache_creation_input_tokens: 5, cache_read_input_tokens: 100, output_tokens: 1 } },
  };

  it("maps an error event after the stream started, and counts cached input as input", async () => {
    const overloaded = sse(start, { type: "error", error: { type: "overloaded_error", message: `Overloaded; your key ${KEY} waits` } });
    const error = await failure(complete(provider(), request(model([{ rawBody: overloaded }]))));
    expect(error.code).toBe("model_overloaded");
    // The provider's own words, without the key should it echo it.
    expect(error.message).toContain("Overloaded; your key");
    expect(error.message).not.toContain(KEY);

    const done = sse(start, { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 3 } }, { type: "message_stop" });
    const { response } = await complete(provider(), request(model([{ rawBody: done }])));
    expect(response.usage).toEqual({ inputTokens: 115, outputTokens: 3, cacheCreationInputTokens: 5, cacheReadInputTokens: 100 });
  });

  it("drops a tool call that max_tokens cut off, keeping the text before it", async () => {
    const cut = sse(
      start,
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Writing the file." } },
      { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_1", name: "write", input: {} } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"path": "a.txt", "content": "Once upon' } },
      { type: "message_delta", delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 4096 } },
      { type: "message_stop" },
    );
    const { response } = await complete(provider(), request(model([{ rawBody: cut }])));
    expect(response).toMatchObject({ content: [{ type: "text", text: "Writing the file." }], stopReason: "max_tokens" });
  });

  it("fails with model_unavailable when the stream ends before message_stop", async () => {
    const unfinished = sse(start, { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    expect((await failure(complete(provider(), request(model([{ rawBody: unfinished }]))))).code).toBe("model_unavailable");
  });
});

describe("model settings and the provider registry", () => {
  it("has documented defaults and accepts 0 retries", () => {
    expect(loadSettings({}).models).toEqual({
      anthropicBaseUrl: "https://api.anthropic.com",
      openaiBaseUrl: "https://api.openai.com/v1",
      openaiApi: "responses",
      maxRetries: 2,
      timeoutSecs: 300,
    });
    // Any other base URL is taken for an OpenAI-compatible server, unless told otherwise.
    expect(loadSettings({ SERVICE_OPENAI_BASE_URL: "http://127.0.0.1:8000/v1" }).models.openaiApi).toBe("chat-completions");
    expect(loadSettings({ SERVICE_OPENAI_BASE_URL: "http://127.0.0.1:8000/v1", SERVICE_OPENAI_API: "responses" }).models.openaiApi).toBe("responses");
    expect(loadSettings({ SERVICE_OPENAI_API: "chat-completions" }).models.openaiApi).toBe("chat-completions");
    expect(() => loadSettings({ SERVICE_OPENAI_API: "completions" })).toThrow(/SERVICE_OPENAI_API/);
    expect(loadSettings({ SERVICE_MODEL_MAX_RETRIES: "0" }).models.maxRetries).toBe(0);
    expect(() => loadSettings({ SERVICE_MODEL_MAX_RETRIES: "-1" })).toThrow(/SERVICE_MODEL_MAX_RETRIES/);
    expect(() => loadSettings({ SERVICE_MODEL_TIMEOUT_SECS: "0" })).toThrow(/SERVICE_MODEL_TIMEOUT_SECS/);
    expect(() => loadSettings({ SERVICE_OPENAI_BASE_URL: "api.openai.com" })).toThrow(/SERVICE_OPENAI_BASE_URL/);
  });

  it("creates both providers by name, pointed at the configured base URLs", async () => {
    const settings = loadSettings({ SERVICE_ANTHROPIC_BASE_URL: scripted.anthropicBaseUrl, SERVICE_OPENAI_BASE_URL: `${scripted.openaiBaseUrl}/` });
    const providers = createModelProviders(settings.models, settings.sessions.maxJsonDepth);
    expect([...providers.keys()]).toEqual(["anthropic", "openai"]);
    for (const provider of providers.values()) {
      const { response } = await complete(provider, request(model([{ text: `hello from ${provider.name}` }])));
      expect(response.content).toEqual([{ type: "text", text: `hello from ${provider.name}` }]);
    }
    expect(scripted.requests.slice(-2).map((sent) => sent.path)).toEqual(["/v1/messages", "/v1/chat/completions"]);

    const responses = loadSettings({ SERVICE_OPENAI_BASE_URL: scripted.openaiBaseUrl, SERVICE_OPENAI_API: "responses" });
    const openai = createModelProviders(responses.models, responses.sessions.maxJsonDepth).get("openai")!;
    expect((await complete(openai, request(model([{ text: "hello from responses" }])))).response.content).toEqual([
      { type: "text", text: "hello from responses" },
    ]);
    expect(scripted.requests.at(-1)!.path).toBe("/v1/responses");
  });
});

describe("the scripted provider", () => {
  it("loops a script when asked, and answers non-streaming requests", async () => {
    const name = model([{ text: "one" }, { text: "two" }], true);
    const texts = [];
    for (let i = 0; i < 3; i++) {
      const answer = await postJson(`${scripted.openaiBaseUrl}/chat/completions`, { model: name, messages: [] });
      texts.push((answer as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content);
    }
    expect(texts).toEqual(["one", "two", "one"]);
    const anthropicAnswer = await postJson(`${scripted.anthropicBaseUrl}/v1/messages`, { model: name, messages: [] });
    expect(anthropicAnswer).toMatchObject({ type: "message", content: [{ type: "text", text: "two" }], stop_reason: "end_turn" });
    const responsesAnswer = await postJson(`${scripted.openaiBaseUrl}/responses`, { model: name, input: [] });
    expect(responsesAnswer).toMatchObject({
      object: "response",
      status: "completed",
      output: [{ type: "message", content: [{ type: "output_text", text: "one" }] }],
    });
  });

  it("loads scripts through its control endpoint, refusing unknown step fields", async () => {
    const put = (steps: unknown) => fetch(`${scripted.url}/_scripts/remote%2Fmodel`, { method: "PUT", body: JSON.stringify({ steps }) });
    const refused = await put([{ txet: "typo" }]);
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("txet");
    expect((await put([{ text: "loaded remotely" }])).status).toBe(204);
    const { response } = await complete(adapters[0]!.create(), request("remote/model"));
    expect(response.content).toEqual([{ type: "text", text: "loaded remotely" }]);
  });
});

async function postJson(url: string, body: unknown): Promise<unknown> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return response.json();
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
