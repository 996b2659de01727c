import * as http from "node:http";
import * as https from "node:https";
import { text } from "node:stream/consumers";
import { setTimeout as sleep } from "node:timers/promises";
import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import { redactText } from "../redaction/index.ts";
import { traceHeaders } from "../tracing/index.ts";
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
  /** A reply whose tool call input nests deeper is model_invalid_response (SERVICE_JOURNAL_MAX_JSON_DEPTH). */
  maxJsonDepth: number;
}

export interface StreamRequest {
  /** The provider's name, for error messages. */
  provider: string;
  url: string;
  /** Including the auth header. */
  headers: Record<string, string>;
  /** JSON text. */
  body: string;
}

/** One server-sent event of a reply. */
export type ServerSentEvent = EventSourceMessage;

/** What naming a failure needs to know about the call. */
interface CallContext {
  provider: string;
  apiKey: string;
  timeoutMs: number;
  /** When the call must be over (epoch ms): its own time bound or the caller's deadline, whichever comes first. */
  endsAtMs: number;
  /** The caller's signal: when it fired, the call was cancelled. */
  callerSignal: AbortSignal;
  /** The caller's signal or the time bound, whichever fires first; it aborts every request and pause. */
  signal: AbortSignal;
  /** Nothing is sent before it resolves (ModelCallOptions.sendAfter). */
  sendAfter: Promise<unknown> | undefined;
}

/** Larger than any event the providers send; bounds what a misbehaving server can make us buffer. */
const MAX_EVENT_CHARS = 4 * 1024 * 1024;
/** How much of a provider's error message is worth carrying. */
const MAX_DETAIL_CHARS = 500;
/** The reason of the call's own signal when its time bound passes (its message is never shown). */
const TIMED_OUT = new Error("the model call outlived its time bound");

/**
 * POSTs a JSON body and yields the server-sent events of the reply. A retryable failure before
 * the reply starts is retried, up to maxRetries times; once events flow nothing is retried,
 * because the caller has already seen text deltas. Every failure surfaces as a ModelError.
 *
 * It speaks node:http(s) through Node's global agents (keep-alive, and the process's proxy
 * settings when NODE_USE_ENV_PROXY asks for them) rather than fetch: fetch and its web streams
 * cost about 350 µs of CPU per call more, as much as the rest of a text turn's model call
 * (docs/performance.md). Redirects are never followed, as node:http never does: a key in a
 * custom header (x-api-key) would follow one to another origin.
 */
export async function* streamEvents(request: StreamRequest, options: ProviderOptions, call: ModelCallOptions): AsyncGenerator<ServerSentEvent> {
  const bound = new CallBound(call.signal, options.timeoutMs);
  const context: CallContext = {
    provider: request.provider,
    apiKey: call.apiKey,
    timeoutMs: options.timeoutMs,
    endsAtMs: Math.min(Date.now() + options.timeoutMs, call.deadlineMs ?? Number.POSITIVE_INFINITY),
    callerSignal: call.signal,
    signal: bound.signal,
    sendAfter: call.sendAfter,
  };
  let response: http.IncomingMessage | undefined;
  try {
    for (let retry = 0; ; retry++) {
      const outcome = await attempt(request, context);
      let failure: FailedAttempt;
      if ("error" in outcome) failure = outcome;
      else {
        response = outcome;
        // The reply has started streaming only once its first event is in: a stream cut before
        // it (right after the headers) is a failure before the reply, retried like a refused POST.
        const events = readEvents(response, context);
        const first = await events.next().catch((error: unknown) => (error instanceof ModelError ? error : transportFailure(error, context)));
        if (first instanceof ModelError) failure = { error: first };
        else if (first.done) failure = { error: cutOff(context.provider) };
        else {
          yield first.value;
          yield* events;
          return;
        }
        response.destroy();
        response = undefined;
      }
      await beforeRetry(failure, retry, options, context);
    }
  } finally {
    bound.releaseWhenClosed(response);
  }
}

/** Parses the JSON object an event carries. */
export function eventJson(event: ServerSentEvent, provider: string): object {
  let value: unknown;
  try {
    value = JSON.parse(event.data);
  } catch {
    value = undefined;
  }
  if (typeof value !== "object" || value === null) throw new ModelError("model_invalid_response", `${provider}: an event of the reply is not a JSON object`);
  return value;
}

/**
 * The names a provider gives a failure it reports in its stream, after the reply started
 * (Anthropic's error types; OpenAI's error codes, or types when there is no code); any other is
 * model_unavailable. The names of the two providers do not collide.
 */
const STREAMED_ERRORS = new Map<string, ModelErrorCode>([
  ["overloaded_error", "model_overloaded"],
  ["rate_limit_error", "model_rate_limited"],
  ["rate_limit_exceeded", "model_rate_limited"],
  ["invalid_request_error", "model_rejected"],
  ["invalid_prompt", "model_rejected"],
  ["api_error", "model_unavailable"],
  ["server_error", "model_unavailable"],
]);

/**
 * A failure the provider reported in its stream after the reply started (never retried): its
 * code from the error's name, its message the provider's own (providerText).
 */
export function streamedFailure(provider: string, name: unknown, message: unknown, apiKey: string): ModelError {
  // An identifier, or nothing: the provider's own words go in the detail, cut and redacted.
  const named = typeof name === "string" && /^[\w.-]{1,64}$/.test(name) ? name : undefined;
  const detail = providerText(message, apiKey);
  return new ModelError(
    STREAMED_ERRORS.get(named ?? "") ?? "model_unavailable",
    `${provider}: the reply broke off with ${named ?? "an error"}${detail === undefined ? "" : `: ${detail}`}`,
  );
}

/** The error for a stream that ended before the provider said the reply was complete. */
export function cutOff(provider: string): ModelError {
  return new ModelError("model_unavailable", `${provider}: the stream ended before the reply was complete`);
}

/**
 * The call's own signal: the caller's, or the time bound. One timer per call, cleared when the
 * response is done with (AbortSignal.timeout's timer would live on for the whole bound after
 * every call).
 */
class CallBound {
  readonly #controller = new AbortController();
  readonly #caller: AbortSignal;
  readonly #timer: NodeJS.Timeout;
  readonly #onCallerAbort = () => this.#controller.abort(this.#caller.reason);

  constructor(caller: AbortSignal, timeoutMs: number) {
    this.#caller = caller;
    if (caller.aborted) this.#controller.abort(caller.reason);
    else caller.addEventListener("abort", this.#onCallerAbort, { once: true });
    this.#timer = setTimeout(() => this.#controller.abort(TIMED_OUT), timeoutMs).unref();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /**
   * The reply may be complete (message_stop, [DONE]) before its HTTP response has ended: what is
   * left is read and dropped so that the connection goes back to the agent, still under the
   * bound, which is released once the response closes.
   */
  releaseWhenClosed(response: http.IncomingMessage | undefined): void {
    if (response === undefined || response.closed) return this.#release();
    response.resume();
    response.once("close", () => this.#release());
  }

  #release(): void {
    clearTimeout(this.#timer);
    this.#caller.removeEventListener("abort", this.#onCallerAbort);
  }
}

/** Waits before retry number `retry` of a failed attempt, or throws its failure when it is not to be retried. */
async function beforeRetry({ error, retryAfterMs }: FailedAttempt, retry: number, options: ProviderOptions, context: CallContext): Promise<void> {
  if (!error.retryable || retry >= options.maxRetries) throw withRetryAfter(error, retryAfterMs);
  const waitMs = backoffMs(retry, options.retryBaseDelayMs ?? 500, retryAfterMs);
  // Waiting longer than the call may last would only end in model_timeout, losing the reason.
  if (Date.now() + waitMs >= context.endsAtMs) throw withRetryAfter(error, retryAfterMs, "which is longer than the call may still last");
  await pause(waitMs, context);
}

/** The provider's failure, saying how long it asked to be left alone (and in details, as `retryAfterSecs`). */
function withRetryAfter(error: ModelError, retryAfterMs: number | undefined, why?: string): ModelError {
  if (retryAfterMs === undefined) return error;
  const secs = Math.ceil(retryAfterMs / 1000);
  const message = `${error.message}; the provider asks to retry after ${secs} s${why ? `, ${why}` : ""}`;
  return new ModelError(error.code, message, error.status, { ...error.details, retryAfterSecs: String(secs) });
}

interface FailedAttempt {
  error: ModelError;
  /** How long the provider asked us to wait before trying again. */
  retryAfterMs?: number | undefined;
}

async function attempt(request: StreamRequest, context: CallContext): Promise<http.IncomingMessage | FailedAttempt> {
  let response: http.IncomingMessage;
  try {
    response = await post(request, context);
  } catch (error) {
    return { error: transportFailure(error, context) };
  }
  const status = response.statusCode ?? 0;
  if (status < 200 || status > 299) return { error: await statusFailure(response, context), retryAfterMs: retryAfterMs(response.headers) };
  if (!response.headers["content-type"]?.startsWith("text/event-stream")) {
    response.destroy();
    return { error: new ModelError("model_invalid_response", `${context.provider}: the reply is not an event stream`, status) };
  }
  return response;
}

/**
 * The POST, resolved with the response once its headers are in; the signal destroys request and
 * response. With `sendAfter`, the request is made at once but writes nothing (headers included)
 * until it resolves: node:http hands a request its socket only on a later tick, so a request
 * made once `sendAfter` resolved would wait behind everything else that resolution set going
 * (a run's answer and its first events), and then still be written.
 */
async function post(request: StreamRequest, { signal, sendAfter }: CallContext): Promise<http.IncomingMessage> {
  const url = new URL(request.url);
  const send = url.protocol === "https:" ? https.request : http.request;
  const refusal = sendAfter?.then(
    () => undefined,
    (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
  );
  // Made after the I/O of the current turn of the event loop: what the caller set going before
  // (the store starts the batch that `sendAfter` stands for with setImmediate) is not held up by it.
  if (refusal !== undefined) await new Promise((next) => setImmediate(next));
  return new Promise((resolve, reject) => {
    // traceHeaders: the model call's span (model-span.ts) is the parent of the provider's, if it traces.
    const headers = { ...request.headers, ...traceHeaders(), "content-length": Buffer.byteLength(request.body) };
    const outgoing = send(url, { method: "POST", headers, signal }, resolve);
    outgoing.once("error", reject);
    if (refusal === undefined) return void outgoing.end(request.body);
    void refusal.then((error) => {
      if (error !== undefined) outgoing.destroy(error);
      else if (!outgoing.destroyed) outgoing.end(request.body);
    });
  });
}

/** `response` is an event stream: attempt() checked. */
async function* readEvents(response: http.IncomingMessage, context: CallContext): AsyncGenerator<ServerSentEvent> {
  const events: ServerSentEvent[] = [];
  let malformed: ParseError | undefined;
  const parser = createParser({ onEvent: (event) => events.push(event), onError: (error) => (malformed ??= error), maxBufferSize: MAX_EVENT_CHARS });
  response.setEncoding("utf8");
  try {
    // Not destroyed when the reader stops early: streamEvents reads what is left.
    for await (const chunk of response.iterator({ destroyOnReturn: false }) as AsyncIterable<string>) {
      parser.feed(chunk);
      if (malformed) throw new ModelError("model_invalid_response", `${context.provider}: the reply is not a well-formed event stream`);
      for (const event of events.splice(0)) {
        // Events parsed from one chunk are not handed out once the call was stopped.
        if (context.signal.aborted) throw transportFailure(context.signal.reason, context);
        yield event;
      }
    }
  } catch (error) {
    if (error instanceof ModelError) throw error;
    throw transportFailure(error, context);
  }
}

/** A failed request, body read or pause: cancelled or timed out when a signal fired, else the network. */
function transportFailure(error: unknown, context: CallContext): ModelError {
  if (context.callerSignal.aborted) return new ModelError("model_cancelled", `${context.provider}: the call was cancelled`);
  if (context.signal.aborted) return new ModelError("model_timeout", `${context.provider}: no complete reply within ${context.timeoutMs} ms`);
  return new ModelError("model_unavailable", `${context.provider}: connection failed (${error instanceof Error ? error.message : String(error)})`);
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

async function statusFailure(response: http.IncomingMessage, context: CallContext): Promise<ModelError> {
  const status = response.statusCode ?? 0;
  const code = codeForStatus(status);
  const body = await text(response).catch(() => "");
  // A provider's 401 message may quote part of the refused key; say nothing beyond the status.
  const detail = code === "model_auth_failed" ? undefined : providerMessage(body, context.apiKey);
  const message = `${context.provider}: ${STATUS_SUMMARY[code]} (HTTP ${status})${detail === undefined ? "" : `: ${detail}`}`;
  return new ModelError(code, message, status);
}

/** The provider's own explanation (both wire formats put it at error.message), with the key cut out in case it was echoed. */
function providerMessage(body: string, apiKey: string): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(body)?.error?.message;
  } catch {
    return undefined;
  }
  return providerText(message, apiKey);
}

/** A provider's explanation fit to keep: a string, the key cut out should it be echoed, at most MAX_DETAIL_CHARS. */
function providerText(message: unknown, apiKey: string): string | undefined {
  if (typeof message !== "string" || message === "") return undefined;
  return redactText(message, [apiKey]).slice(0, MAX_DETAIL_CHARS);
}

/** Both providers send retry-after (seconds); both SDKs also honour the finer retry-after-ms. */
function retryAfterMs(headers: http.IncomingHttpHeaders): number | undefined {
  const ms = Number(headers["retry-after-ms"] ?? NaN);
  if (ms >= 0) return ms;
  const secs = Number(headers["retry-after"] ?? NaN);
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
