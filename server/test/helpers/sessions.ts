import * as fs from "node:fs/promises";
import * as path from "node:path";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { RunService } from "../../../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionService, type SessionEvent } from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import { StatusService } from "../../../gen/skillenv/status/v1/status_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { COMPONENTS_DIR } from "./pool.ts";
import { bearer } from "./service.ts";

function transport(baseUrl: string, key: string) {
  return createConnectTransport({
    baseUrl,
    httpVersion: "2",
    interceptors: [(next) => (request) => (request.header.set("authorization", `Bearer ${key}`), next(request))],
  });
}

/** A Connect client of SessionService for one workspace key. */
export function sessionClient(baseUrl: string, key: string): Client<typeof SessionService> {
  return createClient(SessionService, transport(baseUrl, key));
}

/** A Connect client of RunService for one workspace key. */
export function runClient(baseUrl: string, key: string): Client<typeof RunService> {
  return createClient(RunService, transport(baseUrl, key));
}

/** A Connect client of StatusService for one workspace key. */
export function statusClient(baseUrl: string, key: string): Client<typeof StatusService> {
  return createClient(StatusService, transport(baseUrl, key));
}

/** The session's events from the start until one satisfies `until` (inclusive). */
export async function eventsUntil(client: Client<typeof SessionService>, sessionId: string, until: (event: SessionEvent) => boolean): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  const abort = new AbortController();
  try {
    for await (const { event } of client.watchSession({ sessionId }, { signal: abort.signal })) {
      events.push(event!);
      if (until(event!)) break;
    }
  } finally {
    abort.abort();
  }
  return events;
}

/** Whether an event ends a run: turn.completed, turn.failed or run.cancelled (of `runId`, when given). */
export function runEnded(runId?: string): (event: SessionEvent) => boolean {
  return (event) => ["turn.completed", "turn.failed", "run.cancelled"].includes(event.type) && (runId === undefined || event.data?.runId === runId);
}

/** Admits build/components/<name>.wasm as a tool (or agent loop) of the key's workspace; returns its id. */
export async function admitTool(baseUrl: string, key: string, name: string, kind: "tools" | "agentloops" = "tools"): Promise<string> {
  const bytes = await fs.readFile(path.join(COMPONENTS_DIR, `${name}.wasm`));
  const response = await fetch(`${baseUrl}/v1/${kind}`, { method: "POST", headers: { ...bearer(key), "content-type": "application/wasm" }, body: bytes });
  if (response.status !== 200) throw new Error(`admitting ${name}: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

export async function admitProgram(baseUrl: string, key: string, source: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v1/programs`, { method: "POST", headers: { ...bearer(key), "content-type": "text/plain" }, body: source });
  if (response.status !== 200) throw new Error(`admitting a program: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/** The stable code of a refused call (google.rpc.ErrorInfo.reason). */
export async function refusedWith(call: Promise<unknown>): Promise<string | undefined> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
  }
  throw new Error("expected the call to be refused");
}

/** Every file under `dir` whose bytes contain `needle`. */
export async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const bytes = await fs.readFile(file).catch(() => undefined);
    if (bytes?.includes(needle)) found.push(file);
  }
  return found;
}

/**
 * Makes the call until a replica serves it: as a client does while a dead owner's lease runs out
 * (`unavailable`) or a session changes hands under a call (`session_moved`, also Unavailable).
 */
export async function whenServed<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (ConnectError.from(error).code !== Code.Unavailable) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}
