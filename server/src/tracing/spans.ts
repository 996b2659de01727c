/**
 * What a span may carry (docs/operations.md, "Traces"): names, kinds, ids, counts, codes, the
 * semantic conventions' attributes. Never a key, a credential, a tool's input or output, a
 * prompt or a model's text, nor an error's message (a peer wrote it, and it may quote any of
 * those): a failure is told by its stable code (`error.type`) only.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from "@opentelemetry/api";

export { SpanKind, type Attributes, type Context, type Span };

/** The instrumentation scope of every span the service makes. */
const SCOPE = "skillenv";

/**
 * Asked of the API each time, not kept: the provider is installed after modules load, and a
 * tracer kept from before would stay the no-op one. Without tracing this is the API's no-op.
 */
function tracer() {
  return trace.getTracer(SCOPE);
}

/**
 * Runs `work` in a new span, a child of the current one, and ends the span when the work has
 * settled. A throw marks the span failed with the error's stable code (its `code` when it is a
 * string, else its class name) and is thrown on.
 */
export function inSpan<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>, kind: SpanKind = SpanKind.INTERNAL): Promise<T> {
  return tracer().startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      markFailed(span, errorTypeOf(error));
      throw error;
    } finally {
      span.end();
    }
  });
}

/** A span that ends in `errorType` (a stable code) failed: error.type and an error status, no message. */
export function markFailed(span: Span, errorType: string): void {
  span.setAttribute("error.type", errorType);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

function errorTypeOf(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : "unknown";
}

/**
 * A server span for a request that arrived with `headers`: a W3C `traceparent` among them makes
 * its span the parent (a remote one). Returns the span and the context to serve the request in.
 */
export function startServerSpan(
  name: string,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  attributes: Attributes,
): { span: Span; context: Context } {
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = tracer().startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/**
 * A client span for a call to a peer, a child of the current span, and the headers that make it
 * the parent of the peer's own spans. The caller ends it, when the call (its stream too) is over.
 */
export function startClientSpan(name: string, attributes: Attributes): { span: Span; headers: Record<string, string> } {
  const span = tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes });
  const headers: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), headers);
  return { span, headers };
}

/**
 * `work`, made to run in the context current now wherever it is called from: for callbacks that
 * arrive on a channel opened in some other request's context (a worker process's messages).
 */
export function bindToCurrentContext<A extends unknown[], R>(work: (...args: A) => R): (...args: A) => R {
  return context.bind(context.active(), work);
}

/** `server.address` and `server.port` of a peer at `baseUrl`, as client spans carry them. */
export function serverAttributes(baseUrl: string): Attributes {
  const url = new URL(baseUrl);
  return { "server.address": url.hostname, "server.port": Number(url.port) || (url.protocol === "https:" ? 443 : 80) };
}

/** Runs `work` with `within` as the current context. */
export function runWithin<T>(within: Context, work: () => T): T {
  return context.with(within, work);
}

/**
 * The headers that carry the current span to a peer (`traceparent`, and `tracestate` when set),
 * to add to an outgoing request; none when nothing is traced.
 */
export function traceHeaders(): Record<string, string> {
  const headers: Record<string, string> = {};
  propagation.inject(context.active(), headers);
  return headers;
}
