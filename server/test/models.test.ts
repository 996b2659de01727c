import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type RecordedRequest, type ScriptedProvider, type Step } from "../../testing/scripted-provider/index.ts";
import { loadSettings } from "../src/config/index.ts";
import {
  createAnthropicProvider,
  createModelProviders,
  createOpenAIChatProvider,
  ModelError,
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
    expect(response.usage).toEqual({ inputTokens: 1234, outputTokens: 56 });
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
    const messages = requestsFor(name)[0]!.body.messages;
    if (adapter.name === "anthropic") {
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
      maxRetries: 2,
      timeoutSecs: 300,
    });
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
