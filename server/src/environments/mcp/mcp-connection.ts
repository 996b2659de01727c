import { AsyncLocalStorage } from "node:async_hooks";
import { setImmediate } from "node:timers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { traceHeaders } from "../../tracing/index.ts";
import { isNotSentCode } from "../outgoing.ts";

/** The service as an MCP client, as it introduces itself in `initialize`. */
const CLIENT_INFO = { name: "skillenv", version: "0.1.0" };

/**
 * What the transport saw of one tools/call: whether the request left, whether the server
 * answered its POST, and when its response stream ended. The SDK keeps a request whose stream
 * broke waiting (for a resumption this service does not attempt), so the binding learns of a
 * lost call here.
 */
export class CallTrace {
  /** The JSON-RPC id of the tools/call, once it is sent. */
  requestId: string | number | undefined;
  /** The request failed before it left (connection refused, name not resolved). */
  notSent = false;
  /** The server answered the POST (any status): it received the call. */
  answered = false;
  /**
   * Resolves once the call's response stream has ended, after the SDK has read everything it
   * held: a call still unsettled then will never get its result on this stream.
   */
  readonly ended: Promise<void>;
  #end!: () => void;

  constructor() {
    this.ended = new Promise((resolve) => {
      this.#end = resolve;
    });
  }

  /** The raw body ended or broke; the SDK's parsing pipeline drains in microtasks, so one macrotask later it has delivered every message. */
  streamEnded(): void {
    setImmediate(this.#end);
  }
}

/** The trace of the tools/call being sent in this async context (the fetch below reads it). */
const traces = new AsyncLocalStorage<CallTrace>();

export function traced<T>(trace: CallTrace, send: () => Promise<T>): Promise<T> {
  return traces.run(trace, send);
}

export function wasNotSent(error: unknown): boolean {
  return isNotSentCode((error as { cause?: { code?: unknown } } | undefined)?.cause?.code);
}

/**
 * One binding's MCP session with its server: connected (initialize) on first need, dropped when
 * it can no longer be trusted (a lost stream, a 404 for an expired session), and connected
 * again on the next need. Requests carry the credential, unsealed for each one.
 */
export class McpConnection {
  readonly #url: URL;
  readonly #credential: () => string | undefined;
  #client: Promise<Client> | undefined;
  /** Waiters for the delivery of a notifications/cancelled, by the cancelled request's id: told whether the server received it. */
  readonly #cancellations = new Map<string | number, (delivered: boolean) => void>();

  constructor(url: string, credential: () => string | undefined) {
    this.#url = new URL(url);
    this.#credential = credential;
  }

  /** The connected client; connects (initialize, then notifications/initialized) when there is none. */
  client(signal: AbortSignal, timeoutMs: number): Promise<Client> {
    if (!this.#client) {
      const connecting = this.#connect(signal, timeoutMs);
      this.#client = connecting;
      connecting.catch(() => {
        if (this.#client === connecting) this.#client = undefined;
      });
    }
    return this.#client;
  }

  /** The protocol version the server agreed to, once connected. */
  async protocolVersion(): Promise<string | undefined> {
    const client = await this.#client;
    return (client?.transport as StreamableHTTPClientTransport | undefined)?.protocolVersion;
  }

  /** Resolves once a notifications/cancelled for `requestId` was sent: true when the server answered its POST, false when it could not be sent. */
  cancellationDelivered(requestId: string | number): Promise<boolean> {
    return new Promise((resolve) => this.#cancellations.set(requestId, resolve));
  }

  /** Drops the MCP session without telling the server (its streams are closed). */
  reset(): void {
    const client = this.#client;
    this.#client = undefined;
    void client?.then((connected) => connected.close()).catch(() => undefined);
  }

  /** Ends the MCP session at the server (HTTP DELETE) and closes it; false when there was none in this process. */
  async terminate(): Promise<boolean> {
    const client = this.#client;
    this.#client = undefined;
    if (!client) return false;
    const connected = await client.catch(() => undefined);
    if (!connected) return false;
    try {
      await (connected.transport as StreamableHTTPClientTransport).terminateSession();
      return true;
    } finally {
      await connected.close().catch(() => undefined);
    }
  }

  #cancellationSent(requestId: string | number, delivered: boolean): void {
    this.#cancellations.get(requestId)?.(delivered);
    this.#cancellations.delete(requestId);
  }

  async #connect(signal: AbortSignal, timeoutMs: number): Promise<Client> {
    const transport = new StreamableHTTPClientTransport(this.#url, {
      fetch: this.#fetch,
      // No resumption: a broken response stream ends its call as unknown, never re-sent or awaited.
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
    });
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    try {
      await client.connect(transport, { signal, timeout: timeoutMs });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    return client;
  }

  readonly #fetch: FetchLike = async (url, init) => {
    const headers = new Headers(init?.headers);
    // The current span (a tools/call's, when it is one) becomes the parent of the server's.
    for (const [name, value] of Object.entries(traceHeaders())) headers.set(name, value);
    const credential = this.#credential();
    if (credential !== undefined) headers.set("authorization", `Bearer ${credential}`);
    const message = init?.method === "POST" && typeof init.body === "string" ? jsonRpcOf(init.body) : undefined;
    const trace = message?.method === "tools/call" ? traces.getStore() : undefined;
    if (trace) trace.requestId = message?.id;
    const cancelled = message?.method === "notifications/cancelled" ? (message.params as { requestId?: string | number } | undefined)?.requestId : undefined;
    let response: Response;
    try {
      response = await fetch(url, { ...init, headers });
    } catch (error) {
      if (trace && wasNotSent(error)) trace.notSent = true;
      if (cancelled !== undefined) this.#cancellationSent(cancelled, false);
      throw error;
    }
    if (cancelled !== undefined) this.#cancellationSent(cancelled, response.ok);
    if (!trace) return response;
    trace.answered = true;
    if (!response.body) {
      trace.streamEnded();
      return response;
    }
    return new Response(
      watched(response.body, () => trace.streamEnded()),
      { status: response.status, statusText: response.statusText, headers: response.headers },
    );
  };
}

/** The method, id and params of a JSON-RPC message's text; undefined for a batch or anything else. */
function jsonRpcOf(text: string): { method?: string; id?: string | number; params?: unknown } | undefined {
  try {
    const message = JSON.parse(text) as unknown;
    return typeof message === "object" && message !== null && !Array.isArray(message) ? (message as { method?: string; id?: string | number }) : undefined;
  } catch {
    return undefined;
  }
}

/** `body`, passed through, with `ended` called once when it ends, breaks or is cancelled. */
function watched(body: ReadableStream<Uint8Array>, ended: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let told = false;
  const tell = () => {
    if (told) return;
    told = true;
    ended();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) {
          controller.close();
          tell();
        } else controller.enqueue(value);
      } catch (error) {
        controller.error(error);
        tell();
      }
    },
    cancel(reason) {
      tell();
      return reader.cancel(reason);
    },
  });
}
