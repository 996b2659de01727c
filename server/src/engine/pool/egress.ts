import { rm } from "node:fs/promises";
import net from "node:net";
import { originAllowed } from "../../config/origins.ts";

/** The longest CONNECT request head a worker may send. */
const MAX_HEAD = 8192;

interface Tunnel {
  client: net.Socket;
  upstream: net.Socket;
  /** `scheme://host:port/`, as checked. */
  url: string;
}

/**
 * One worker process's way out to the network (docs/environments.md, threat model). A sandboxed
 * worker has no network namespace of its own beyond loopback; its HTTP agents tunnel every
 * connection through this Unix socket with `CONNECT host:port` (worker/egress-tunnel.ts). A
 * tunnel opens only to an origin granted to an invocation in flight on this worker, and closes
 * when no invocation in flight grants it any more: a worker process that escaped its guest-facing
 * checks reaches no more than its current invocations were granted.
 */
export class Egress {
  readonly socketPath: string;
  readonly #server: net.Server;
  readonly #granted: () => readonly string[];
  readonly #tunnels = new Set<Tunnel>();

  private constructor(socketPath: string, server: net.Server, granted: () => readonly string[]) {
    this.socketPath = socketPath;
    this.#server = server;
    this.#granted = granted;
  }

  /** Listens on `socketPath`; `granted` is the union of the network grants in flight on the worker. */
  static async listen(socketPath: string, granted: () => readonly string[]): Promise<Egress> {
    const server = net.createServer();
    const egress = new Egress(socketPath, server, granted);
    server.on("connection", (socket) => egress.#accept(socket));
    await rm(socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
    return egress;
  }

  /** Closes the tunnels whose origin no invocation in flight grants any more. */
  revoke(): void {
    const granted = this.#granted();
    for (const tunnel of this.#tunnels) if (!originAllowed(granted, tunnel.url)) this.#close(tunnel);
  }

  async close(): Promise<void> {
    for (const tunnel of this.#tunnels) this.#close(tunnel);
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await rm(this.socketPath, { force: true });
  }

  #accept(client: net.Socket): void {
    let head = "";
    client.on("error", () => client.destroy());
    const onData = (chunk: Buffer) => {
      head += chunk.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) {
        if (head.length > MAX_HEAD) refuse(client, 431, "Request Header Fields Too Large");
        return;
      }
      client.off("data", onData);
      client.pause();
      // A worker speaks only after the answer: anything past the head is a protocol violation.
      if (end + 4 !== head.length) {
        refuse(client, 400, "Bad Request");
        return;
      }
      this.#open(client, head.slice(0, end));
    };
    client.on("data", onData);
  }

  #open(client: net.Socket, head: string): void {
    const [requestLine = "", ...headerLines] = head.split("\r\n");
    const target = /^CONNECT ([^\s]+) HTTP\/1\.[01]$/.exec(requestLine)?.[1];
    const scheme = headerLines.map((line) => /^x-skillenv-scheme:\s*(https?)\s*$/i.exec(line)?.[1]?.toLowerCase()).find(Boolean);
    const address = target === undefined || !scheme ? undefined : parseTarget(scheme, target);
    if (!address) {
      refuse(client, 400, "Bad Request");
      return;
    }
    const { url, host, port } = address;
    if (!originAllowed(this.#granted(), url)) {
      refuse(client, 403, "Forbidden");
      return;
    }
    const upstream = net.connect({ host, port });
    const tunnel: Tunnel = { client, upstream, url };
    this.#tunnels.add(tunnel);
    const close = () => this.#close(tunnel);
    upstream.once("connect", () => {
      if (!this.#tunnels.has(tunnel)) return;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.once("error", () => {
      if (!client.destroyed && upstream.connecting) refuse(client, 502, "Bad Gateway");
      close();
    });
    upstream.once("close", close);
    client.once("close", close);
  }

  #close(tunnel: Tunnel): void {
    if (!this.#tunnels.delete(tunnel)) return;
    tunnel.client.destroy();
    tunnel.upstream.destroy();
  }
}

function refuse(client: net.Socket, status: number, reason: string): void {
  client.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Length: 0\r\n\r\n`);
}

/**
 * A CONNECT target (`host:port` or `[v6]:port`) as the URL parser normalises it: the host that is
 * checked is the host that is connected to (every IPv4 spelling is dotted decimal by then).
 */
function parseTarget(scheme: string, target: string): { url: string; host: string; port: number } | undefined {
  if (!/^(?:\[[0-9A-Fa-f:.]+\]|[^:[\]/@?#\\\s]+):\d{1,5}$/.test(target)) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(`${scheme}://${target}/`);
  } catch {
    return undefined;
  }
  const port = Number(parsed.port || (scheme === "https" ? 443 : 80));
  if (!(port >= 1 && port <= 65535)) return undefined;
  const host = parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname;
  return { url: parsed.href, host, port };
}
