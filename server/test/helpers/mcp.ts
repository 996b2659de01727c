import { spawn, type ChildProcess } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { afterAll } from "vitest";
import { freePort } from "./ports.ts";

const EVERYTHING = path.resolve(import.meta.dirname, "../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js");

/** Servers still running when their file's tests are over (a failed test's own kill never ran). */
const running = new Set<ChildProcess>();
afterAll(() => {
  for (const child of running) child.kill("SIGKILL");
});

/** The reference MCP server (@modelcontextprotocol/server-everything) over Streamable HTTP, as a child process. */
export interface EverythingServer {
  /** Its MCP endpoint: http://127.0.0.1:<port>/mcp */
  url: string;
  origin: string;
  /** SIGKILL: no goodbye on any stream. */
  kill(): Promise<void>;
}

export async function startEverything(): Promise<EverythingServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => running.delete(child));
  let stderr = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes("listening on port")) resolve();
    });
    void exited.then(() => reject(new Error(`server-everything exited before listening:\n${stderr}`)));
  });
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/mcp`,
    origin,
    kill: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** One request the proxy passed on: its HTTP method, Authorization header and JSON-RPC body. */
export interface SeenRequest {
  method: string;
  authorization: string | undefined;
  /** The W3C trace context header it came with, if any. */
  traceparent: string | undefined;
  /** The parsed JSON-RPC message of a POST. */
  message: { method?: string; id?: number | string; params?: Record<string, unknown> } | undefined;
}

/** A recording HTTP proxy in front of an MCP server: what the service sent it, as the server received it. */
export interface RecordingProxy {
  url: string;
  origin: string;
  seen: SeenRequest[];
  /** Resolves with the first request, seen already or later, that `matches`. */
  whenSeen(matches: (request: SeenRequest) => boolean): Promise<SeenRequest>;
  /** Requests (a client's event streams among them) whose connection to the proxy is still open, by method. */
  open(method: string): number;
  close(): Promise<void>;
}

export async function startRecordingProxy(target: EverythingServer): Promise<RecordingProxy> {
  const seen: SeenRequest[] = [];
  const waiting = new Set<{ matches: (request: SeenRequest) => boolean; resolve: (request: SeenRequest) => void }>();
  const upstream = new URL(target.origin);
  const open = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const method = request.method ?? "";
    open.set(method, (open.get(method) ?? 0) + 1);
    response.once("close", () => open.set(method, open.get(method)! - 1));
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      const entry: SeenRequest = {
        method: request.method ?? "",
        authorization: request.headers.authorization,
        traceparent: request.headers.traceparent as string | undefined,
        message: parseMessage(body),
      };
      seen.push(entry);
      for (const waiter of waiting) {
        if (!waiter.matches(entry)) continue;
        waiting.delete(waiter);
        waiter.resolve(entry);
      }
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, method: request.method, path: request.url, headers: { ...request.headers, host: upstream.host } },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
          answer.on("error", () => response.destroy());
        },
      );
      forward.on("error", () => response.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${origin}/mcp`,
    origin,
    seen,
    open: (method) => open.get(method) ?? 0,
    whenSeen: (matches) =>
      new Promise((resolve) => {
        const found = seen.find(matches);
        if (found) resolve(found);
        else waiting.add({ matches, resolve });
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function parseMessage(body: Buffer): SeenRequest["message"] {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString("utf8")) as SeenRequest["message"];
  } catch {
    return undefined;
  }
}
