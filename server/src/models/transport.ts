import { setTimeout as sleep } from "node:timers/promises";
import { EventSourceParserStream, ParseError, type EventSourceMessage } from "eventsource-parser/stream";
import { ModelError, type ModelCallOptions, type ModelErrorCode } from "./port.ts";

/** How an adapter reaches its provider; createModelProviders fills it from the settings. */
export interface ProviderOptions {
  /** Scheme, host and path prefix, without a trailing slash. */
  baseUrl: string;
  /** Retries of a retryable failure that happens before the reply starts streaming; 0 disables. */
  maxRetries: number;
  /** Bound on one model call, retries and their pauses included. */
  timeoutMs: number;
  /** Pause before the first retry, doubled for each further one, unless the provider says how long. Default 500. */
  retryBaseDelayMs?: number;
}

export interface StreamRequest {
  /** The provider's name, for error messages. */
  provider: string;
  url: string;
  /** Including the auth header. */
  headers: Record<string, string>;
  body: unknown;
}

/** What naming a failure needs to know about the call. */
interface CallContext {
  provider: string;
  apiKey: string;
  timeoutMs: number;
  /** The caller's signal: when it fired, the call was cancelled. */
  callerSignal: AbortSignal;
  /** The caller's signal or the time bound, whichever fires first; it aborts every request and pause. */
  signal: AbortSignal;
}

/** Larger than any event the providers send; bounds what a misbehaving server can make us buffer. */
const MAX_EVENT_CHARS = 4 * 1024 * 1024;
/** How much of a provider's error message is worth carrying. */
const MAX_DETAIL_CHARS = 500;

/**
 * POSTs a JSON body and yields the server-sent events of the reply. A retryable failure before
 * the reply starts is retried, up to maxRetries times; once events flow nothing is retried,
 * because the caller has already seen text deltas. Every failure surfaces as a ModelError.
 */
export async function* streamEvents(request: StreamRequest, options: ProviderOptions, call: ModelCallOptions): AsyncGenerator<EventSourceMessage> {
  const context: CallContext = {
    provider: request.provider,
    apiKey: call.apiKey,
    timeoutMs: options.timeoutMs,
    callerSignal: call.signal,
    signal: AbortSignal.any([call.signal, AbortSignal.timeout(options.timeoutMs)]),
  };
  const response = await connect(request, options, context);
  yield* readEvents(response, context);
}

/** Parses the JSON object an event carries. */
export function eventJson(event: EventSourceMessage, provider: string): object {
  let value: unknown;
  try {
    value = JSON.parse(event.data);
  } catch {
    value = undefined;
  }
  if (typeof value !== "object" || value === null) throw new ModelError("model_invalid_response", `${provider}: an event of the reply is not a JSON object`);
  return value;
}

/** The error for a stream that ended before the provider said the reply was complete. */
export function cutOff(provider: string): ModelError {
  return new ModelError("model_unavailable", `${provider}: the stream ended before the reply was complete`);
}

async function connect(request: StreamRequest, options: ProviderOptions, context: CallContext): Promise<Response> {
  for (let retry = 0; ; retry++) {
    const outcome = await attempt(request, context);
    if (outcome instanceof Response) return outcome;
    if (!outcome.error.retryable || retry >= options.maxRetries) throw outcome.error;
    await pause(backoffMs(retry, options.retryBaseDelayMs ?? 500, outcome.retryAfterMs), context);
  }
}

interface FailedAttempt {
  error: ModelError;
  /** How long the provider asked us to wait before trying again. */
  retryAfterMs?: number | undefined;
}

async function attempt(request: StreamRequest, context: CallContext): Promise<Response | FailedAttempt> {
  const body = JSON.stringify(request.body);
  let response: Response;
  try {
    // No redirects: a key in a custom header (x-api-key) would follow one to another origin.
    response = await fetch(request.url, { method: "POST", headers: request.headers, body, signal: context.signal, redirect: "manual" });
  } catch (error) {
    return { error: transportFailure(error, context) };
  }
  if (!response.ok) return { error: await statusFailure(response, context), retryAfterMs: retryAfterMs(response.headers) };
  if (response.body === null || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
    await response.body?.cancel();
    return { error: new ModelError("model_invalid_response", `${context.provider}: the reply is not an event stream`, response.status) };
  }
  return response;
}

/** `response` has a body: attempt() checked. */
async function* readEvents(response: Response, context: CallContext): AsyncGenerator<EventSourceMessage> {
  // Node's web streams are async iterable; the DOM lib of the tsconfig (without dom.asynciterable) does not say so.
  const events = response.body!
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream({ onError: "terminate", maxBufferSize: MAX_EVENT_CHARS })) as unknown as AsyncIterable<EventSourceMessage>;
  try {
    for await (const event of events) yield event;
  } catch (error) {
    if (error instanceof ParseError) throw new ModelError("model_invalid_response", `${context.provider}: the reply is not a well-formed event stream`);
    throw transportFailure(error, context);
  }
}

/** A failed fetch, body read or pause: cancelled or timed out when a signal fired, else the network. */
function transportFailure(error: unknown, context: CallContext): ModelError {
  if (context.callerSignal.aborted) return new ModelError("model_cancelled", `${context.provider}: the call was cancelled`);
  if (context.signal.aborted) return new ModelError("model_timeout", `${context.provider}: no complete reply within ${context.timeoutMs} ms`);
  return new ModelError("model_unavailable", `${context.provider}: connection failed (${networkReason(error)})`);
}

/** Node's fetch throws "fetch failed" or "terminated"; the cause says what happened (connect ECONNREFUSED, other side closed). */
function networkReason(error: unknown): string {
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  return String(cause instanceof Error ? cause.message : error instanceof Error ? error.message : error);
}

type StatusCode = Extract<ModelErrorCode, "model_auth_failed" | "model_rate_limited" | "model_overloaded" | "model_rejected" | "model_unavailable">;

const STATUS_SUMMARY: Record<StatusCode, string> = {
  model_auth_failed: "the API key was refused",
  model_rate_limited: "rate limited",
  model_overloaded: "overloaded",
  model_rejected: "the request was refused",
  model_unavailable: "the provider failed",
};

function codeForStatus(status: number): StatusCode {
  if (status === 401 || status === 403) return "model_auth_failed";
  if (status === 429) return "model_rate_limited";
  // Anthropic answers 529 when overloaded, OpenAI 503.
  if (status === 529 || status === 503) return "model_overloaded";
  if (status >= 500) return "model_unavailable";
  return "model_rejected";
}

async function statusFailure(response: Response, context: CallContext): Promise<ModelError> {
  const code = codeForStatus(response.status);
  const body = await response.text().catch(() => "");
  // A provider's 401 message may quote part of the refused key; say nothing beyond the status.
  const detail = code === "model_auth_failed" ? undefined : providerMessage(body, context.apiKey);
  const message = `${context.provider}: ${STATUS_SUMMARY[code]} (HTTP ${response.status})${detail === undefined ? "" : `: ${detail}`}`;
  return new ModelError(code, message, response.status);
}

/** The provider's own explanation (both wire formats put it at error.message), with the key cut out in case it was echoed. */
function providerMessage(body: string, apiKey: string): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(body)?.error?.message;
  } catch {
    return undefined;
  }
  if (typeof message !== "string") return undefined;
  return (apiKey === "" ? message : message.replaceAll(apiKey, "[redacted]")).slice(0, MAX_DETAIL_CHARS);
}

/** Both providers send retry-after (seconds); both SDKs also honour the finer retry-after-ms. */
function retryAfterMs(headers: Headers): number | undefined {
  const ms = Number(headers.get("retry-after-ms") ?? NaN);
  if (ms >= 0) return ms;
  const secs = Number(headers.get("retry-after") ?? NaN);
  return secs >= 0 ? secs * 1000 : undefined;
}

/** Exponential backoff with jitter, so runs that hit a rate limit together do not retry together. */
function backoffMs(retry: number, baseMs: number, retryAfterMs: number | undefined): number {
  return retryAfterMs ?? baseMs * 2 ** retry * (0.5 + Math.random() / 2);
}

async function pause(ms: number, context: CallContext): Promise<void> {
  try {
    await sleep(ms, undefined, { signal: context.signal });
  } catch (error) {
    throw transportFailure(error, context);
  }
}
