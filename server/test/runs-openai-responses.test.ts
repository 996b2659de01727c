// Runs whose `openai` provider speaks the Responses API (SERVICE_OPENAI_API=responses), end to
// end: a real service, its Connect clients, and the scripted provider over loopback HTTP.
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionEvent, SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startScriptedProvider, type RecordedRequest, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, filesContaining, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd } from "./helpers/skills.ts";

const PROVIDER_KEY = "sk-test-responses-key-5f1c07";

/** A run of `model` through the openai provider; its model parameters ask for reasoning summaries. */
function runInput(model: string, fields: Partial<RunInput> = {}): RunInput {
  return {
    model: { provider: "openai", name: model, maxTokens: 0, parameters: { reasoning: { effort: "low", summary: "auto" } } },
    skills: [],
    message: "hello",
    agentsMd: "",
    files: [],
    providerKeys: { openai: PROVIDER_KEY },
    idempotencyKey: "",
    maxRounds: 0,
    ...fields,
  } as unknown as RunInput;
}

/** A Responses API request body as the stand-in received it (wire JSON). */
type Sent = { input: Array<Record<string, unknown>>; instructions?: string; store?: boolean; include?: string[]; tools?: Array<{ name: string }> };

describe("runs on the OpenAI Responses API", () => {
  let provider: ScriptedProvider;
  let service: TestService;
  let sessions: Client<typeof SessionService>;
  let runs: Client<typeof RunService>;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    service = await startTestService({
      SERVICE_OPENAI_BASE_URL: provider.openaiBaseUrl,
      SERVICE_OPENAI_API: "responses",
      SERVICE_MODEL_MAX_RETRIES: "0",
    });
    sessions = sessionClient(service.url, KEY_A);
    runs = runClient(service.url, KEY_A);
    await publish(service, "trip-planner", bundleOf({ "SKILL.md": skillMd({ description: "Plans trips.", body: "# Trips\nAsk for dates first." }) }));
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await provider?.close();
  });

  const sentFor = (model: string): Array<RecordedRequest & { body: Sent }> =>
    provider.requests.filter((request) => request.body.model === model) as Array<RecordedRequest & { body: Sent }>;

  async function run(model: string, fields: Partial<RunInput> = {}) {
    const { session } = await sessions.createSession({ environments: [], tools: [] });
    const sessionId = session!.id;
    const { run: started } = await runs.createRun({ sessionId, run: runInput(model, fields) });
    const all = await eventsUntil(sessions, sessionId, runEnded(started!.id));
    const { run: done } = await runs.getRun({ sessionId, runId: started!.id });
    return { run: done!, events: all.filter((event: SessionEvent) => event.data?.runId === started!.id) };
  }

  it("refuses model parameters through which the provider would keep or take over the conversation", async () => {
    const { session } = await sessions.createSession({ environments: [], tools: [] });
    for (const parameter of ["input", "instructions", "max_output_tokens", "store", "previous_response_id", "conversation"]) {
      const model = { provider: "openai", name: "never-called", maxTokens: 0, parameters: { [parameter]: "x" } };
      const refused = await runs.createRun({ sessionId: session!.id, run: runInput("never-called", { model } as never) }).then(
        () => undefined,
        (error: unknown) => String(error),
      );
      expect(refused, parameter).toContain(`model.parameters may not set ${parameter}`);
    }
    expect(sentFor("never-called")).toEqual([]);
  });

  it("carries a reasoning item across a tool call's two rounds, shows its summary, and keeps the key in its header only", async () => {
    provider.script("reasoning-model", [
      {
        thinking: "The user wants a trip: load the planner skill.",
        toolCalls: [{ id: "call_load", name: "skills", input: { action: "load", name: "trip-planner" } }],
        usage: { inputTokens: 200, outputTokens: 30, reasoningTokens: 18 },
      },
      { thinking: "The skill says to ask for dates.", text: "Which dates?", usage: { inputTokens: 240, outputTokens: 12, reasoningTokens: 6 } },
    ]);
    const { run: done, events } = await run("reasoning-model", {
      agentsMd: "Be brief.",
      message: "Plan my trip to Oslo.",
      skills: [{ kind: "skill", name: "trip-planner" }] as never,
    });
    // The stand-in refuses a round 2 without round 1's reasoning item exactly as issued, as the API does.
    expect({ status: done.status, error: done.error?.message }).toEqual({ status: "completed", error: undefined });
    expect({ outputText: done.outputText, rounds: done.rounds, toolCalls: done.toolCalls }).toEqual({ outputText: "Which dates?", rounds: 2, toolCalls: 1 });

    const [round1, round2] = sentFor("reasoning-model");
    for (const sent of [round1!, round2!]) {
      expect(sent.path).toBe("/v1/responses");
      expect(sent.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
      expect(sent.body).toMatchObject({ store: false, include: ["reasoning.encrypted_content"], reasoning: { effort: "low", summary: "auto" } });
      expect(sent.body.instructions).toContain("Be brief.");
      expect(sent.body.tools!.map((tool) => tool.name)).toEqual(["skills"]);
    }
    // Round 2: the question, round 1's reasoning item and function call in their order, the tool's output.
    const issued = round2!.body.input[1]!;
    expect(issued).toEqual({
      id: expect.stringMatching(/^rs_/),
      type: "reasoning",
      summary: [{ type: "summary_text", text: "The user wants a trip: load the planner skill." }],
      encrypted_content: expect.stringMatching(/^gAAAAA/),
    });
    expect(round2!.body.input.map((item) => item.type ?? item.role)).toEqual(["user", "reasoning", "function_call", "function_call_output"]);
    expect(round2!.body.input[3]).toMatchObject({ call_id: "call_load", output: expect.stringContaining("Ask for dates first.") });

    expect(events.filter((event) => event.type === "assistant.thinking").map((event) => event.data)).toEqual([
      { runId: done.id, round: 1, text: "The user wants a trip: load the planner skill." },
      { runId: done.id, round: 2, text: "The skill says to ask for dates." },
    ]);
    expect(events.filter((event) => event.type === "model.usage").map((event) => event.data?.reasoningTokens)).toEqual([18, 6]);
    expect(done.usage).toMatchObject({ inputTokens: 440n, outputTokens: 42n, reasoningTokens: 24n });

    // Nowhere but in its header: not in what was sent, the events, the run's record, the stored files or the logs.
    expect(JSON.stringify(provider.requests.map((request) => request.body))).not.toContain(PROVIDER_KEY);
    expect(JSON.stringify(events.map((event) => event.data))).not.toContain(PROVIDER_KEY);
    expect(JSON.stringify(done, (_, value) => (typeof value === "bigint" ? String(value) : value))).not.toContain(PROVIDER_KEY);
    expect(await filesContaining(service.dataDir, PROVIDER_KEY)).toEqual([]);
    expect(service.logs.join("\n")).not.toContain(PROVIDER_KEY);
  });

  it("completes a text-only turn, streaming its text and counting the cached input", async () => {
    provider.script("text-model", [{ text: "Hello from Responses.", chunkChars: 4, usage: { inputTokens: 300, outputTokens: 5, cacheReadInputTokens: 1024 } }]);
    const { run: done, events } = await run("text-model");
    expect({ status: done.status, outputText: done.outputText, stopReason: done.stopReason }).toEqual({
      status: "completed",
      outputText: "Hello from Responses.",
      stopReason: "end_turn",
    });
    const deltas = events.filter((event) => event.type === "assistant.delta").map((event) => event.data?.text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Hello from Responses.");
    // OpenAI counts cached input as part of input_tokens; so does the run.
    expect(done.usage).toMatchObject({ inputTokens: 1324n, outputTokens: 5n, cacheReadInputTokens: 1024n });
    expect(events.find((event) => event.type === "model.usage")?.data).toMatchObject({ inputTokens: 1324, cacheReadInputTokens: 1024 });
    // Without reasoning in the reply, there is nothing to show or carry.
    expect(events.some((event) => event.type === "assistant.thinking")).toBe(false);
    expect(sentFor("text-model")[0]!.body.input).toEqual([{ role: "user", content: [{ type: "input_text", text: "hello" }] }]);
  });

  it("fails the turn with the provider's message when the response fails mid-stream", async () => {
    const event = (type: string, fields: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
    const failed = [
      event("response.created", { sequence_number: 0, response: { id: "resp_x", status: "in_progress", output: [] } }),
      event("response.output_item.added", { sequence_number: 1, output_index: 0, item: { id: "msg_x", type: "message", role: "assistant", content: [] } }),
      event("response.output_text.delta", { sequence_number: 2, item_id: "msg_x", output_index: 0, content_index: 0, delta: "Let me" }),
      event("response.failed", {
        sequence_number: 3,
        response: { id: "resp_x", status: "failed", error: { code: "server_error", message: "The model stopped producing output unexpectedly." }, usage: null },
      }),
    ].join("");
    provider.script("failing-model", [{ rawBody: failed }]);
    const { run: done, events } = await run("failing-model");
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "model_unavailable", retryable: true });
    expect(done.error?.message).toContain("The model stopped producing output unexpectedly.");
    expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "model_unavailable" } });
    expect(events.filter((event) => event.type === "assistant.delta").map((event) => event.data?.text)).toEqual(["Let me"]);
  });

  it("fails at once, as rate limited, when a 429 asks to wait longer than the turn may last", async () => {
    const patient = await startTestService({
      SERVICE_OPENAI_BASE_URL: provider.openaiBaseUrl,
      SERVICE_OPENAI_API: "responses",
      SERVICE_MAX_TURN_SECS: "5",
      SERVICE_MODEL_MAX_RETRIES: "2",
    });
    try {
      const message = "Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 30000.";
      provider.script("limited-model", [{ error: { status: 429, type: "tokens", message, retryAfterSecs: 60 } }]);
      const client = sessionClient(patient.url, KEY_A);
      const { session } = await client.createSession({ environments: [], tools: [] });
      const started = Date.now();
      const { run } = await runClient(patient.url, KEY_A).createRun({ sessionId: session!.id, run: runInput("limited-model") });
      const events = await eventsUntil(client, session!.id, runEnded(run!.id));
      expect(Date.now() - started).toBeLessThan(4000);
      expect(events.at(-1)).toMatchObject({ type: "turn.failed", data: { code: "model_rate_limited", retryable: true, details: { retryAfterSecs: "60" } } });
      const { run: done } = await runClient(patient.url, KEY_A).getRun({ sessionId: session!.id, runId: run!.id });
      expect(done?.error).toMatchObject({ code: "model_rate_limited", retryable: true, details: { retryAfterSecs: "60" } });
      expect(done?.error?.message).toContain(message);
      expect(sentFor("limited-model")).toHaveLength(1);
    } finally {
      await patient.close();
    }
  });
});
