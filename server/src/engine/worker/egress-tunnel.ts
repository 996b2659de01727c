// The egress of a worker process's thread (loaded by egress-preload.ts where SKILLENV_EGRESS is
// set). A sandboxed worker has no network of its own: every connection an HTTP agent makes
// becomes a tunnel through the pool's egress proxy, a Unix socket bound into the sandbox
// (SKILLENV_EGRESS), which admits only origins granted to the invocations in flight on this
// worker (pool/egress.ts). The guest-facing check (wasi/network.ts) runs first and gives the guest
// its proper error; this is the second line.
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";

const socketPath = process.env.SKILLENV_EGRESS;

interface ConnectOptions {
  host?: string | null;
  hostname?: string | null;
  port?: number | string | null;
  servername?: string;
}

type Callback = (error: Error | null, socket?: net.Socket) => void;

/** The longest answer line the proxy sends (its status line and headers). */
const MAX_ANSWER = 4096;

function tunnel(options: ConnectOptions, secure: boolean, callback: Callback): void {
  const host = String(options.hostname ?? options.host ?? "");
  const port = Number(options.port ?? (secure ? 443 : 80));
  const authority = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  const proxy = net.connect(socketPath!);
  let answer = "";
  const fail = (error: Error) => {
    proxy.destroy();
    callback(error);
  };
  proxy.once("error", fail);
  proxy.once("connect", () => proxy.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nX-Skillenv-Scheme: ${secure ? "https" : "http"}\r\n\r\n`));
  const onData = (chunk: Buffer) => {
    answer += chunk.toString("latin1");
    const end = answer.indexOf("\r\n\r\n");
    if (end < 0) {
      if (answer.length > MAX_ANSWER) fail(new Error("the egress proxy sent an oversized answer"));
      return;
    }
    proxy.off("data", onData);
    proxy.off("error", fail);
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
    if (status !== "200") {
      fail(
        Object.assign(new Error(`the egress proxy refused ${authority} (${status ?? "no status"})`), { code: status === "403" ? "EACCES" : "ECONNREFUSED" }),
      );
      return;
    }
    // Bytes past the answer would belong to the tunnel; the proxy sends none before the client speaks.
    if (!secure) {
      callback(null, proxy);
      return;
    }
    const servername = options.servername ?? (net.isIP(host) ? undefined : host);
    const secured = tls.connect({ ...(options as tls.ConnectionOptions), socket: proxy, ...(servername ? { servername } : {}) });
    callback(null, secured);
  };
  proxy.on("data", onData);
}

if (socketPath) {
  http.Agent.prototype.createConnection = function createConnection(options: ConnectOptions, callback: Callback) {
    tunnel(options, false, callback);
    return undefined as unknown as net.Socket;
  } as typeof http.Agent.prototype.createConnection;
  https.Agent.prototype.createConnection = function createConnection(options: ConnectOptions, callback: Callback) {
    tunnel(options, true, callback);
    return undefined as unknown as net.Socket;
  } as typeof https.Agent.prototype.createConnection;
}
