import type { DescMethodStreaming, DescMethodUnary, DescService, Message } from "@bufbuild/protobuf";
import { ConnectError, type HandlerContext, type ServiceImpl, type StreamResponse, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { ERROR_DOMAIN, serviceError } from "../errors/index.ts";
import { isId } from "../ids/index.ts";
import { traceHeaders } from "../tracing/index.ts";
import type { SessionOwnership } from "./ownership.ts";

/** Set on a call one replica forwards to another: the owner serves it or refuses it, never forwards it again. */
export const FORWARDED_HEADER = "skillenv-forwarded-by";

/** A call on its way to the owner: how to reach it, and the signal that ends it when the caller leaves or the owner is gone. */
interface Forwarded {
  transport: Transport;
  header: Headers;
  signal: AbortSignal;
  done(): void;
}

const OWNER_GONE = new Error("the session's owner stopped renewing its lease");

/** Request headers that travel with a forwarded call: the caller's key and trace context. */
const FORWARDED_REQUEST_HEADERS = ["authorization", "traceparent", "tracestate"];

/**
 * A service whose calls for a session are served by the replica that owns it (docs/operations.md,
 * "Scaling"). Every method whose request names a session (`session_id`, or a host stream's first
 * message, attach) runs `impl` here when this replica owns the session, or takes it over, and
 * otherwise is made again to the owner over gRPC (HTTP/2) with the caller's key, its answer or
 * stream relayed back as it comes. It wraps the implementation, below the protocols and the JSON
 * transcoder, so every protocol and client is forwarded alike; the owner authenticates and
 * authorizes the call again. On the embedded store (one process) `impl` is returned as it is.
 */
export function forwardingService<S extends DescService>(service: S, impl: ServiceImpl<S>, ownership: SessionOwnership): ServiceImpl<S> {
  if (!ownership.shared) return impl;
  const transports = new Map<string, Transport>();
  const forward = async (sessionId: string, context: HandlerContext): Promise<Forwarded | undefined> => {
    const route = await ownership.route(sessionId);
    if (route.here) return undefined;
    if (context.requestHeader.has(FORWARDED_HEADER)) {
      throw serviceError("session_moved", `session ${sessionId} changed replicas while the call was forwarded; retry the call`);
    }
    let transport = transports.get(route.address);
    if (!transport) {
      transport = createGrpcTransport({ baseUrl: route.address });
      transports.set(route.address, transport);
    }
    const header = new Headers({ [FORWARDED_HEADER]: ownership.replica });
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = context.requestHeader.get(name);
      if (value !== null) header.set(name, value);
    }
    // Traced, the owner's span is a child of this replica's (the caller's is its parent); untraced, the caller's context passes through.
    for (const [name, value] of Object.entries(traceHeaders())) header.set(name, value);
    // An owner that stops answering (paused, cut off) would hold the call for ever: once its lease
    // has expired the call ends `unavailable`, and the caller's retry takes the session over.
    const controller = new AbortController();
    const onAbort = () => controller.abort(context.signal.reason);
    context.signal.addEventListener("abort", onAbort, { once: true });
    const watchdog = setInterval(() => {
      void ownership.ownerAlive(route.replica).then(
        (alive) => alive || controller.abort(OWNER_GONE),
        () => undefined,
      );
    }, ownership.leaseMs);
    const done = () => {
      clearInterval(watchdog);
      context.signal.removeEventListener("abort", onAbort);
    };
    return { transport, header, signal: controller.signal, done };
  };
  const wrapped: Record<string, unknown> = {};
  const methods = impl as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const method of service.methods) {
    const own = methods[method.localName]!.bind(impl);
    switch (method.methodKind) {
      case "unary": {
        const unary = method as DescMethodUnary;
        wrapped[method.localName] = async (request: Message, context: HandlerContext) => {
          const sessionId = sessionIdOf(request);
          const target = sessionId === undefined ? undefined : await forward(sessionId, context);
          if (!target) return own(request, context);
          try {
            const answer = await target.transport.unary(unary, target.signal, undefined, target.header, request as never, undefined);
            return answer.message;
          } catch (error) {
            throw unreachable(error);
          } finally {
            target.done();
          }
        };
        break;
      }
      case "server_streaming": {
        const streaming = method as DescMethodStreaming;
        wrapped[method.localName] = async function* (request: Message, context: HandlerContext) {
          const sessionId = sessionIdOf(request);
          const target = sessionId === undefined ? undefined : await forward(sessionId, context);
          if (!target) return yield* own(request, context) as AsyncIterable<Message>;
          yield* relayed(target, target.transport.stream(streaming, target.signal, undefined, target.header, single(request) as never, undefined));
        };
        break;
      }
      case "bidi_streaming":
      case "client_streaming": {
        const streaming = method as DescMethodStreaming;
        wrapped[method.localName] = async function* (requests: AsyncIterable<Message>, context: HandlerContext) {
          const { first, rest } = await peek(requests);
          const sessionId = sessionIdOf(first);
          const target = sessionId === undefined ? undefined : await forward(sessionId, context);
          if (!target) return yield* own(rest, context) as AsyncIterable<Message>;
          yield* relayed(target, target.transport.stream(streaming, target.signal, undefined, target.header, rest as never, undefined));
        };
        break;
      }
    }
  }
  return wrapped as ServiceImpl<S>;
}

/**
 * The session a request names: its `sessionId`, a host stream's attach, or the session a host
 * connection serves (a Report's `connectionId`, `<session id>.<hcn_ id>`). Ids of another shape
 * are served here (and not found).
 */
function sessionIdOf(message: unknown): string | undefined {
  const fields = message as
    | { sessionId?: unknown; connectionId?: unknown; attach?: { sessionId?: unknown }; message?: { case?: unknown; value?: { sessionId?: unknown } } }
    | undefined;
  const connection = typeof fields?.connectionId === "string" ? fields.connectionId.split(".")[0] : undefined;
  const candidate =
    fields?.sessionId ?? fields?.attach?.sessionId ?? (fields?.message?.case === "attach" ? fields.message.value?.sessionId : undefined) ?? connection;
  return typeof candidate === "string" && isId("ses", candidate) ? candidate : undefined;
}

/** The stream's first message, and the whole stream again for whoever reads it next. */
async function peek<T>(stream: AsyncIterable<T>): Promise<{ first: T | undefined; rest: AsyncIterable<T> }> {
  const iterator = stream[Symbol.asyncIterator]();
  const head = await iterator.next();
  async function* rest() {
    if (head.done) return;
    yield head.value;
    for (;;) {
      const item = await iterator.next();
      if (item.done) return;
      yield item.value;
    }
  }
  return { first: head.done ? undefined : head.value, rest: rest() };
}

async function* single<T>(message: T): AsyncIterable<T> {
  yield message;
}

/** The owner's answer stream, relayed as it comes. */
async function* relayed(target: Forwarded, answer: Promise<StreamResponse>): AsyncIterable<Message> {
  try {
    yield* (await answer).message as AsyncIterable<Message>;
  } catch (error) {
    throw unreachable(error);
  } finally {
    target.done();
  }
}

/**
 * The owner's own errors (they carry the catalogue's ErrorInfo) go back as they are; anything
 * else (the owner could not be reached, its stream broke) is `unavailable`, without its address.
 */
function unreachable(error: unknown): unknown {
  const connectError = ConnectError.from(error);
  if (connectError.findDetails(ErrorInfoSchema).some((info) => info.domain === ERROR_DOMAIN)) return connectError;
  return serviceError("unavailable", "the replica that serves this session could not be reached; retry the call");
}
