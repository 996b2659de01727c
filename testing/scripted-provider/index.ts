/**
 * A scripted model provider: a real HTTP server on loopback that speaks the Anthropic Messages,
 * OpenAI Chat Completions and OpenAI Responses wire formats and answers each request with the
 * next step of its model's script. Tests, the demo and the benchmarks use it in place of a real
 * model API.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { anthropic } from "./anthropic.ts";
import { openaiChat } from "./openai-chat.ts";
import { openaiResponses } from "./openai-responses.ts";
import { parseScript, ScriptBook, type Script, type Step } from "./script.ts";
import { replyFor, type SseEvent, type WireFormat } from "./wire.ts";

export { parseScript, parseScripts, type Script, type Step } from "./script.ts";

export interface ScriptedProviderOptions {
  /** Scripts by model name. */
  scripts?: Record<string, Script>;
  /** Default 0: a free port. */
  port?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** As received, auth headers included. */
  headers: http.IncomingHttpHeaders;
  /** The parsed JSON body. */
  body: Record<string, unknown>;
}

export interface ScriptedProvider {
  /** http://127.0.0.1:<port> */
  url: string;
  /** For an Anthropic client: it appends /v1/messages. */
  anthropicBaseUrl: string;
  /** For an OpenAI client: it appends /chat/completions or /responses. */
  openaiBaseUrl: string;
  /** Every model request received, in order. */
  requests: RecordedRequest[];
  /** Replaces the model's script. */
  script(model: string, steps: Step[], options?: { loop?: boolean }): void;
  close(): Promise<void>;
}

/** A provider's routes: the Responses format remembers the reasoning items it issued, so each provider has its own. */
function routes(): Map<string, WireFormat> {
  const responses = openaiResponses();
  return new Map<string, WireFormat>([
    ["/v1/messages", anthropic],
    ["/chat/completions", openaiChat],
    ["/v1/chat/completions", openaiChat],
    ["/responses", responses],
    ["/v1/responses", responses],
  ]);
}

/** Control endpoint: PUT /_scripts/<model> with a script as JSON loads it, for a provider started as its own process. */
const SCRIPTS_PATH = "/_scripts/";

export async function startScriptedProvider(options: ScriptedProviderOptions = {}): Promise<ScriptedProvider> {
  const book = new ScriptBook();
  for (const [model, script] of Object.entries(options.scripts ?? {})) book.load(model, script);
  const requests: RecordedRequest[] = [];
  const wires = routes();
  const server = http.createServer((request, response) => {
    handle(request, response, book, requests, wires).catch((error: unknown) => response.destroy(error as Error));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    anthropicBaseUrl: url,
    openaiBaseUrl: `${url}/v1`,
    requests,
    script: (model, steps, { loop = false } = {}) => book.load(model, { steps, loop }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function handle(
  request: http.IncomingMessage,
  response: http.ServerResponse,
  book: ScriptBook,
  requests: RecordedRequest[],
  wires: Map<string, WireFormat>,
): Promise<void> {
  const text = await readBody(request);
  const method = request.method ?? "";
  const path = new URL(request.url ?? "/", "http://provider").pathname;
  if (method === "PUT" && path.startsWith(SCRIPTS_PATH)) return loadScript(decodeURIComponent(path.slice(SCRIPTS_PATH.length)), text, book, response);
  const wire = method === "POST" ? wires.get(path) : undefined;
  if (wire === undefined) return sendJson(response, 404, { error: { message: `scripted provider: no route for ${method} ${path}` } });
  const body = parseObject(text);
  if (body === undefined) return sendJson(response, 400, wire.errorBody("invalid_request_error", "scripted provider: the body is not a JSON object"));
  requests.push({ method, path, headers: request.headers, body });
  const refused = wire.refusal?.(body);
  if (refused !== undefined) return sendJson(response, 400, wire.errorBody("invalid_request_error", refused));
  const next = book.take(String(body.model));
  if ("problem" in next) return sendJson(response, 400, wire.errorBody("invalid_request_error", next.problem));
  await play(next.step, wire, body, text, response);
}

function loadScript(model: string, text: string, book: ScriptBook, response: http.ServerResponse): void {
  try {
    book.load(model, parseScript(JSON.parse(text)));
  } catch (error) {
    return sendJson(response, 400, { error: { message: (error as Error).message } });
  }
  response.writeHead(204).end();
}

/** Answers one request with one step. */
async function play(step: Step, wire: WireFormat, body: Record<string, unknown>, text: string, response: http.ServerResponse): Promise<void> {
  const closed = closedSignal(response);
  if (!(await pause(step.delayMs, closed))) return;
  const streaming = body.stream === true;
  if (step.error !== undefined) {
    const retryAfter: Record<string, string> = step.error.retryAfterSecs === undefined ? {} : { "retry-after": String(step.error.retryAfterSecs) };
    return sendJson(response, step.error.status, wire.errorBody(step.error.type, step.error.message), retryAfter);
  }
  if (step.rawBody !== undefined) {
    response.writeHead(200, { "content-type": streaming ? "text/event-stream" : "application/json" }).end(step.rawBody);
    return;
  }
  const reply = replyFor(step, String(body.model), text);
  if (streaming) return stream(wire.events(reply, body), step, response, closed);
  if (step.drop) return void response.destroy();
  sendJson(response, 200, wire.whole(reply));
}

async function stream(events: SseEvent[], step: Step, response: http.ServerResponse, closed: AbortSignal): Promise<void> {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const dropAt = step.drop ? Math.floor(events.length / 2) : events.length;
  for (const [index, event] of events.entries()) {
    if (index === dropAt) return void response.destroy();
    // Waiting for each write to go out keeps the order honest: a drop comes after what was sent.
    await new Promise((resolve) => response.write(`${event.name === undefined ? "" : `event: ${event.name}\n`}data: ${event.data}\n\n`, resolve));
    if (event.piece && !(await pause(step.chunkDelayMs, closed))) return;
  }
  response.end();
}

/** Waits, unless the client goes away first; true when the answer should go on. */
async function pause(ms: number | undefined, closed: AbortSignal): Promise<boolean> {
  if (ms !== undefined && ms > 0) await sleep(ms, undefined, { signal: closed }).catch(() => {});
  return !closed.aborted;
}

function closedSignal(response: http.ServerResponse): AbortSignal {
  const controller = new AbortController();
  response.once("close", () => controller.abort());
  return controller.signal;
}

async function readBody(request: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function sendJson(response: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}
