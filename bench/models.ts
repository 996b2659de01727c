// Model adapters (issue #21, section 5): the service's own wire code beside the official SDKs
// (@anthropic-ai/sdk, openai: Chat Completions and Responses) making the same streamed call, against the scripted provider in its
// own process. What is measured is the client side of one model call, which is all the adapters
// are: a text turn's difference between the two is this difference (bench/runs.ts measures the
// turn itself). Each call streams a text reply and a tool call and is checked. The SDKs run with
// their retries off, as the service's rule would need; "a client per call" is how the service
// would have to use them (keys are per run), "one client" is the SDKs at their best.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { ServerChild } from "./lib/child.ts";
import { formatFigures } from "./lib/figures.ts";
import { spawnProvider, withChildren } from "./lib/services.ts";
import type { Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { childSide, measureVariants, type Plan, type Variant } from "./lib/variants.ts";
import {
  createAnthropicProvider,
  createOpenAIChatProvider,
  createOpenAIResponsesProvider,
  type ModelProvider,
  type ModelRequest,
} from "../server/src/models/index.ts";

const PLAN: Plan = { rounds: 6, inFlight: 16, budgetMs: 10_000 };
const COUNTS = { warmup: 100, perRound: 100, concurrent: 2000 };
const MODEL = "bench-models";
const KEY = "sk-bench-models";
const REPLY = "Hello from the scripted model, in a few pieces.";
const TOOL = { name: "lookup", input: { query: "weather in Paris", units: "metric" } };
const TOOLS = [{ name: TOOL.name, description: "Looks something up.", inputSchema: { type: "object", properties: { query: { type: "string" } } } }];
const MESSAGES = [{ role: "user" as const, content: [{ type: "text" as const, text: "Say hello, then look up the weather." }] }];

async function run(): Promise<SuiteReport> {
  return withChildren(async (started) => {
    const provider = started(await spawnProvider());
    // Text in eight pieces, then the tool call's input in pieces too: what a stream accumulator has to put together.
    const response = await fetch(`${provider.url}/_scripts/${MODEL}`, {
      method: "PUT",
      body: JSON.stringify({ steps: [{ text: REPLY, toolCalls: [{ id: "call-1", ...TOOL }], chunkChars: 6 }], loop: true }),
    });
    if (!response.ok) throw new Error(`loading the script: ${response.status}`);
    const side = childSide("provider", provider);
    const variants: Variant[] = [
      { name: "anthropic: ours (node:http, eventsource-parser)", call: oursAnthropic(provider), sides: [side], ...COUNTS },
      { name: "anthropic: @anthropic-ai/sdk, a client per call", call: sdkAnthropic(provider, false), sides: [side], ...COUNTS },
      { name: "anthropic: @anthropic-ai/sdk, one client", call: sdkAnthropic(provider, true), sides: [side], ...COUNTS },
      { name: "openai chat: ours (node:http, eventsource-parser)", call: oursOpenAI(provider, "chat"), sides: [side], ...COUNTS },
      { name: "openai chat: openai SDK, a client per call", call: sdkOpenAI(provider, false), sides: [side], ...COUNTS },
      { name: "openai chat: openai SDK, one client", call: sdkOpenAI(provider, true), sides: [side], ...COUNTS },
      { name: "openai responses: ours (node:http, eventsource-parser)", call: oursOpenAI(provider, "responses"), sides: [side], ...COUNTS },
      { name: "openai responses: openai SDK, a client per call", call: sdkOpenAIResponses(provider, false), sides: [side], ...COUNTS },
      { name: "openai responses: openai SDK, one client", call: sdkOpenAIResponses(provider, true), sides: [side], ...COUNTS },
    ];
    const results = await measureVariants(variants, PLAN);
    const rows = results.map((result) => result.row);
    const pair = (ours: number, sdk: number, sdkShared: number, provider: string) => {
      const [o, s, shared] = [rows[ours]!, rows[sdk]!, rows[sdkShared]!];
      return [
        {
          figure: `${provider}: p50 of one streamed call`,
          ours: `${fixed(o.medianMs, 3)} ms`,
          baseline: `SDK ${fixed(s.medianMs, 3)} ms (one client ${fixed(shared.medianMs, 3)} ms)`,
          target: "-",
        },
        {
          figure: `${provider}: client CPU per call`,
          ours: `${fixed(o.clientCpuUs, 0)} µs`,
          baseline: `SDK ${fixed(s.clientCpuUs, 0)} µs (one client ${fixed(shared.clientCpuUs, 0)} µs)`,
          target: "-",
        },
        {
          figure: `${provider}: calls/s, ${PLAN.inFlight} in flight`,
          ours: fixed(o.callsPerSec, 0),
          baseline: `SDK ${fixed(s.callsPerSec, 0)} (one client ${fixed(shared.callsPerSec, 0)})`,
          target: "-",
        },
      ];
    };
    return {
      rows,
      notes: [
        "",
        formatFigures([...pair(0, 1, 2, "anthropic"), ...pair(3, 4, 5, "openai chat"), ...pair(6, 7, 8, "openai responses")]),
        "",
        `Each call: a streamed reply of ${REPLY.length} characters of text and one tool call, in pieces of 6 characters, from the scripted provider ` +
          `in its own process (its CPU is the "server" column); every reply's text and tool input are checked. The adapters and the SDKs run in this process ` +
          `("client" columns, main thread). ${PLAN.rounds} interleaved rounds of ${COUNTS.perRound} sequential calls per variant, then ${COUNTS.concurrent} calls with ${PLAN.inFlight} in flight.`,
      ],
    };
  });
}

const request = (): ModelRequest => ({ model: MODEL, promptCache: false, system: "", messages: MESSAGES, tools: TOOLS, maxTokens: 256, parameters: {} });

function check(text: string, toolName: string | undefined, input: unknown): void {
  if (text !== REPLY || toolName !== TOOL.name || JSON.stringify(input) !== JSON.stringify(TOOL.input)) {
    throw new Error(`unexpected reply: ${JSON.stringify({ text, toolName, input })}`);
  }
}

function oursAnthropic(provider: ServerChild): () => Promise<void> {
  return ours(createAnthropicProvider({ baseUrl: provider.url, maxRetries: 0, timeoutMs: 30_000, maxJsonDepth: 32 }));
}

function oursOpenAI(provider: ServerChild, api: "chat" | "responses"): () => Promise<void> {
  const create = api === "chat" ? createOpenAIChatProvider : createOpenAIResponsesProvider;
  return ours(create({ baseUrl: `${provider.url}/v1`, maxRetries: 0, timeoutMs: 30_000, maxJsonDepth: 32 }));
}

function ours(adapter: ModelProvider): () => Promise<void> {
  return async () => {
    const reply = await adapter.complete(request(), { apiKey: KEY, signal: new AbortController().signal });
    const call = reply.content.find((part) => part.type === "tool_call");
    check(
      reply.content.map((part) => (part.type === "text" ? part.text : "")).join(""),
      call?.type === "tool_call" ? call.name : undefined,
      call?.type === "tool_call" ? call.input : undefined,
    );
  };
}

function sdkAnthropic(provider: ServerChild, shared: boolean): () => Promise<void> {
  const make = () => new Anthropic({ apiKey: KEY, baseURL: provider.url, maxRetries: 0, timeout: 30_000 });
  const one = make();
  return async () => {
    const client = shared ? one : make();
    const message = await client.messages
      .stream({
        model: MODEL,
        max_tokens: 256,
        messages: [{ role: "user", content: MESSAGES[0]!.content[0]!.text }],
        tools: TOOLS.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.inputSchema as Anthropic.Tool.InputSchema })),
      })
      .finalMessage();
    const call = message.content.find((block) => block.type === "tool_use");
    check(
      message.content.map((block) => (block.type === "text" ? block.text : "")).join(""),
      call?.type === "tool_use" ? call.name : undefined,
      call?.type === "tool_use" ? call.input : undefined,
    );
  };
}

function sdkOpenAI(provider: ServerChild, shared: boolean): () => Promise<void> {
  const make = () => new OpenAI({ apiKey: KEY, baseURL: `${provider.url}/v1`, maxRetries: 0, timeout: 30_000 });
  const one = make();
  return async () => {
    const client = shared ? one : make();
    const completion = await client.chat.completions
      .stream({
        model: MODEL,
        max_completion_tokens: 256,
        messages: [{ role: "user", content: MESSAGES[0]!.content[0]!.text }],
        tools: TOOLS.map((tool) => ({ type: "function" as const, function: { name: tool.name, description: tool.description, parameters: tool.inputSchema } })),
      })
      .finalChatCompletion();
    const message = completion.choices[0]!.message;
    const call = message.tool_calls?.[0];
    const fn = call && "function" in call ? call.function : undefined;
    check(message.content ?? "", fn?.name, fn ? JSON.parse(fn.arguments) : undefined);
  };
}

function sdkOpenAIResponses(provider: ServerChild, shared: boolean): () => Promise<void> {
  const make = () => new OpenAI({ apiKey: KEY, baseURL: `${provider.url}/v1`, maxRetries: 0, timeout: 30_000 });
  const one = make();
  return async () => {
    const client = shared ? one : make();
    const response = await client.responses
      .stream({
        model: MODEL,
        max_output_tokens: 256,
        store: false,
        include: ["reasoning.encrypted_content"],
        input: MESSAGES[0]!.content[0]!.text,
        tools: TOOLS.map((tool) => ({
          type: "function" as const,
          name: tool.name,
          description: tool.description,
          parameters: tool.inputSchema,
          strict: false,
        })),
      })
      .finalResponse();
    const call = response.output.find((item) => item.type === "function_call");
    check(
      response.output_text,
      call?.type === "function_call" ? call.name : undefined,
      call?.type === "function_call" ? JSON.parse(call.arguments) : undefined,
    );
  };
}

export const modelsSuite: Suite = {
  name: "models",
  title: "Model adapters: the service's own wire code beside the official SDKs, one streamed call with text and a tool call",
  run,
};
