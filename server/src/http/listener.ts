import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { Duplex } from "node:stream";
import type { HttpLimits } from "../config/index.ts";
import { describeError, serviceError } from "../errors/index.ts";
import { routeByPreface } from "./preface.ts";
import type { RequestListener } from "./request-handler.ts";

export interface ListenOptions {
  host: string;
  port: number;
  tls: { certFile: string; keyFile: string } | undefined;
  limits: HttpLimits;
}

/** A server on one port; close() stops accepting and waits for in-flight requests up to the grace period. */
export interface Listener {
  readonly url: string;
  /** What the port holds now (the metrics): open connections, those speaking HTTP/2, requests in flight. */
  stats(): { connections: number; http2Connections: number; requestsInFlight: number };
  close(graceMs: number): Promise<void>;
}

/** How often Node checks HTTP/1.1 connections against headersTimeout (its default, 30 s, would stretch a 10 s timeout to 40). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * One port for every protocol. With TLS, ALPN picks HTTP/2 or HTTP/1.1. Without TLS, Node's
 * http2 server does not fall back to HTTP/1.1, so a net.Server reads the first bytes: the
 * HTTP/2 client preface goes to the h2c server, anything else to the HTTP/1.1 server.
 * What a connection may hold is bounded (`limits`): deadlines on the first bytes, the request
 * headers and idle connections; caps on connections and on HTTP/2 streams per connection.
 */
export async function listen(options: ListenOptions, onRequest: RequestListener): Promise<Listener> {
  const { limits } = options;
  const inFlight = new InFlight();
  const tracked: RequestListener = (req, res) => {
    inFlight.start(res);
    onRequest(req, res);
  };
  const h2 = options.tls ? await createSecureServer(options.tls, limits, tracked) : http2.createServer(h2Settings(limits), tracked);
  closeIdleSessions(h2, limits.idleConnectionSecs * 1000);
  const h1 = http.createServer({ connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, tracked);
  setHttp1Timeouts(h1, limits);
  answerUnparsedRequests(h1, limits);
  const sniff = (socket: net.Socket) =>
    routeByPreface(socket, limits.headersTimeoutSecs * 1000, (protocol) => (protocol === "h2c" ? h2 : h1).emit("connection", socket));
  const front: net.Server = options.tls ? h2 : net.createServer(sniff);
  front.maxConnections = limits.maxConnections;
  const sessions = trackSessions(h2);
  const sockets = trackSockets(front);
  // Accepted TCP connections (with TLS, `sockets` holds each twice: the socket and its TLS socket).
  let connections = 0;
  front.on("connection", (socket: Duplex) => {
    connections++;
    socket.once("close", () => connections--);
  });

  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(options.port, options.host, () => resolve());
  });
  // Node enforces headersTimeout from the moment a server emits "listening"; the HTTP/1.1 server
  // is handed its sockets and never listens itself, so start its checks by hand.
  h1.emit("listening");
  const address = front.address() as net.AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `${options.tls ? "https" : "http"}://${host}:${address.port}`,
    stats: () => ({ connections, http2Connections: sessions.size, requestsInFlight: inFlight.count }),
    async close(graceMs) {
      const closed = new Promise<void>((resolve) => front.close(() => resolve()));
      for (const session of sessions) session.close();
      await inFlight.drained(graceMs, () => h1.closeIdleConnections());
      for (const socket of sockets) socket.destroy();
      h1.close();
      await closed;
    },
  };
}

function h2Settings(limits: HttpLimits): http2.ServerOptions {
  return { settings: { maxConcurrentStreams: limits.maxConcurrentStreams } };
}

/** With TLS one server speaks HTTP/2 and, by ALPN, HTTP/1.1: it gets the limits of both. */
async function createSecureServer(
  tls: { certFile: string; keyFile: string },
  limits: HttpLimits,
  onRequest: RequestListener,
): Promise<http2.Http2SecureServer> {
  const server = http2.createSecureServer(
    {
      cert: await fs.readFile(tls.certFile),
      key: await fs.readFile(tls.keyFile),
      allowHTTP1: true,
      handshakeTimeout: limits.headersTimeoutSecs * 1000,
      ...h2Settings(limits),
    },
    onRequest,
  );
  setHttp1Timeouts(server, limits);
  answerUnparsedRequests(server, limits);
  return server;
}

/**
 * HTTP/1.1 deadlines (the TLS server speaks HTTP/1.1 too). There is no deadline on a whole
 * request: a large upload over a slow link is legitimate, and a stalled body is caught by the
 * body idle timeout instead (RequestBody).
 */
function setHttp1Timeouts(server: http.Server | http2.Http2SecureServer, limits: HttpLimits): void {
  Object.assign(server, {
    headersTimeout: limits.headersTimeoutSecs * 1000,
    requestTimeout: 0,
    keepAliveTimeout: limits.idleConnectionSecs * 1000,
  });
}

/**
 * Node answers an HTTP/1.1 request it cannot parse (a malformed request line or header, bytes a
 * URL may not hold, headers over its size limit or past the headers timeout) with a bare status
 * line. Here the answer keeps Node's status and connection close, and carries the API's JSON
 * error body with a stable code like every other refusal.
 */
function answerUnparsedRequests(server: http.Server | http2.Http2SecureServer, limits: HttpLimits): void {
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => answerUnparsedRequest(error, socket, limits));
}

function answerUnparsedRequest(error: NodeJS.ErrnoException, socket: Duplex, limits: HttpLimits): void {
  // As Node does: no answer when the client is gone or a response on this connection has begun (it
  // would be corrupted). _httpMessage is the response Node's HTTP/1.1 server has in flight on the socket.
  const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse })._httpMessage;
  if (error.code !== "ECONNRESET" && socket.writable && !inFlight?.headersSent) {
    const { httpStatus, body } = describeError(unparsedRequestError(error, limits));
    const json = JSON.stringify(body);
    const head = [
      `HTTP/1.1 ${httpStatus} ${http.STATUS_CODES[httpStatus]}`,
      "content-type: application/json",
      `content-length: ${Buffer.byteLength(json)}`,
      "connection: close",
    ];
    socket.write(`${head.join("\r\n")}\r\n\r\n${json}`);
  }
  socket.destroy();
}

function unparsedRequestError(error: NodeJS.ErrnoException, limits: HttpLimits) {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return serviceError("headers_too_large", `the request line and headers exceed ${http.maxHeaderSize} bytes`);
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return serviceError("payload_too_large", "the request body's chunk extensions are too large");
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return serviceError("request_timeout", `the request headers did not arrive within ${limits.headersTimeoutSecs} s`);
    default: {
      // llhttp's reason is a short description of what it could not parse, e.g. "Invalid method encountered".
      const reason = (error as { reason?: unknown }).reason;
      return serviceError("malformed_request", `the request is not valid HTTP/1.1${typeof reason === "string" ? `: ${reason}` : ""}`);
    }
  }
}

/**
 * Closes (GOAWAY) HTTP/2 connections that have had no open stream for `idleMs`. Node's own
 * session timeout would also cut a quiet long-lived stream, so open streams are counted.
 */
function closeIdleSessions(server: http2.Http2Server | http2.Http2SecureServer, idleMs: number): void {
  server.on("session", (session) => {
    let openStreams = 0;
    session.on("stream", (stream) => {
      openStreams++;
      stream.once("close", () => openStreams--);
    });
    session.on("timeout", () => (openStreams === 0 ? session.close() : session.setTimeout(idleMs)));
    session.setTimeout(idleMs);
  });
}

function trackSessions(server: http2.Http2Server | http2.Http2SecureServer): Set<http2.ServerHttp2Session> {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return sessions;
}

function trackSockets(server: net.Server): Set<Duplex> {
  const sockets = new Set<Duplex>();
  server.on("connection", (socket: Duplex) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("secureConnection", (socket: Duplex) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  return sockets;
}

/** Counts requests whose responses have not closed yet. */
class InFlight {
  #count = 0;
  #onIdle: (() => void) | undefined;

  get count(): number {
    return this.#count;
  }

  start(res: { once(event: "close", listener: () => void): unknown }): void {
    this.#count++;
    res.once("close", () => {
      this.#count--;
      if (this.#count === 0) this.#onIdle?.();
    });
  }

  /** Resolves when no request is in flight or the grace period is over, nudging idle keep-alive connections shut meanwhile. */
  async drained(graceMs: number, closeIdle: () => void): Promise<void> {
    closeIdle();
    if (this.#count === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(finish, graceMs);
      const nudge = setInterval(closeIdle, 50);
      function finish() {
        clearTimeout(timer);
        clearInterval(nudge);
        resolve();
      }
      this.#onIdle = () => {
        closeIdle();
        finish();
      };
    });
  }
}
