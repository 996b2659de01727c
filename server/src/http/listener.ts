import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { Duplex } from "node:stream";
import type { RequestListener } from "./request-handler.ts";

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export interface ListenOptions {
  host: string;
  port: number;
  tls: { certFile: string; keyFile: string } | undefined;
}

/** A server on one port; close() stops accepting and waits for in-flight requests up to the grace period. */
export interface Listener {
  readonly url: string;
  close(graceMs: number): Promise<void>;
}

/**
 * One port for every protocol. With TLS, ALPN picks HTTP/2 or HTTP/1.1. Without TLS, Node's
 * http2 server does not fall back to HTTP/1.1, so a net.Server peeks at the first bytes: the
 * HTTP/2 client preface goes to the h2c server, anything else to the HTTP/1.1 server.
 */
export async function listen(options: ListenOptions, onRequest: RequestListener): Promise<Listener> {
  const inFlight = new InFlight();
  const tracked: RequestListener = (req, res) => {
    inFlight.start(res);
    onRequest(req, res);
  };
  const h2 = options.tls
    ? http2.createSecureServer({ cert: await fs.readFile(options.tls.certFile), key: await fs.readFile(options.tls.keyFile), allowHTTP1: true }, tracked)
    : http2.createServer({}, tracked);
  const h1 = http.createServer(tracked);
  const front: net.Server = options.tls ? h2 : net.createServer((socket) => routeByPreface(socket, h1, h2));
  const sessions = trackSessions(h2);
  const sockets = trackSockets(front);

  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(options.port, options.host, () => resolve());
  });
  const address = front.address() as net.AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `${options.tls ? "https" : "http"}://${host}:${address.port}`,
    async close(graceMs) {
      const closed = new Promise<void>((resolve) => front.close(() => resolve()));
      for (const session of sessions) session.close();
      await inFlight.drained(graceMs, () => h1.closeIdleConnections());
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

function routeByPreface(socket: net.Socket, h1: http.Server, h2: http2.Http2Server): void {
  socket.once("error", () => socket.destroy());
  const onReadable = () => {
    const head: Buffer | null = socket.read();
    if (head === null) return socket.once("readable", onReadable);
    socket.unshift(head);
    const prefix = head.subarray(0, HTTP2_PREFACE.length);
    if (prefix.length < HTTP2_PREFACE.length && HTTP2_PREFACE.subarray(0, prefix.length).equals(prefix)) {
      // Too few bytes to tell yet: wait for the rest of the preface.
      return socket.once("readable", onReadable);
    }
    (prefix.equals(HTTP2_PREFACE) ? h2 : h1).emit("connection", socket);
  };
  socket.once("readable", onReadable);
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
