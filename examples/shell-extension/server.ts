/**
 * The HTTP side: the Connect protocol (JSON and binary) over HTTP/1.1 and cleartext HTTP/2 on one
 * port, behind an optional bearer credential.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ExtensionEnvironmentService } from "../../gen/skillenv/extension/v1/extension_pb.js";
import type { ShellExtensionService } from "./service.ts";

export interface ServeOptions {
  host: string;
  port: number;
  /** Undefined: calls are not authenticated. */
  token: string | undefined;
  service: ShellExtensionService;
}

export interface RunningServer {
  /** http://host:port */
  url: string;
  /** Stops the operations in flight and every connection. */
  close(): Promise<void>;
}

type Handler = ReturnType<typeof connectNodeAdapter>;

/** How long a new connection may take to send the bytes that tell HTTP/2 from HTTP/1.1. */
const FIRST_BYTES_TIMEOUT_MS = 10_000;

export async function serve(options: ServeOptions): Promise<RunningServer> {
  const connect = connectNodeAdapter({ routes: (router) => router.service(ExtensionEnvironmentService, options.service), grpc: false, grpcWeb: false });
  const handler = requireBearer(options.token, connect);
  const h1 = http.createServer(handler);
  const h2 = http2.createServer(handler);
  const sockets = new Set<net.Socket>();
  const front = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    handOver(socket, h1, h2);
  });
  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(options.port, options.host, resolve);
  });
  const { port } = front.address() as net.AddressInfo;
  return {
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`,
    async close() {
      await options.service.close();
      const closed = new Promise((resolve) => front.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/**
 * Without TLS, Node's HTTP/2 server does not fall back to HTTP/1.1, so the first bytes decide:
 * "PRI" opens the HTTP/2 client preface and no HTTP/1.1 request.
 */
function handOver(socket: net.Socket, h1: http.Server, h2: http2.Http2Server): void {
  let head = Buffer.alloc(0);
  socket.setTimeout(FIRST_BYTES_TIMEOUT_MS, () => socket.destroy());
  socket.on("error", () => socket.destroy());
  const onReadable = (): void => {
    for (let chunk: Buffer | null; (chunk = socket.read()) !== null; ) head = Buffer.concat([head, chunk]);
    if (head.length < 3) return;
    socket.off("readable", onReadable);
    socket.setTimeout(0);
    socket.unshift(head);
    (head.subarray(0, 3).toString("latin1") === "PRI" ? h2 : h1).emit("connection", socket);
  };
  socket.on("readable", onReadable);
}

/** Refuses a call without `Authorization: Bearer <token>` before reading its body. */
function requireBearer(token: string | undefined, next: Handler): Handler {
  if (token === undefined) return next;
  // Digests have one length, so timingSafeEqual compares them without revealing the token's.
  const digest = (text: string): Buffer => createHash("sha256").update(text).digest();
  const expected = digest(`Bearer ${token}`);
  return (request, response) => {
    if (timingSafeEqual(digest(request.headers.authorization ?? ""), expected)) return next(request, response);
    // A Connect error: the HTTP status carries the code for streams, the JSON body for unary calls.
    const body = JSON.stringify({ code: "unauthenticated", message: "this extension requires Authorization: Bearer <credential>" });
    response.writeHead(401, { "content-type": "application/json" });
    response.end(body);
  };
}
