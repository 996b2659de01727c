// Parent side of the sessions and runs suites' children (service-server.ts, provider-server.ts),
// and what both suites do with sessions: Connect clients, admitting echo-wat, an echo session,
// a checked CallTool.
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { fromJson, toJsonString, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createNodeTransport } from "@skillenv/client/node";
import { RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionService, type CreateSessionRequestSchema } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { BENCH_API_KEY, spawnServer, type ServerChild } from "./child.ts";

const COMPONENTS_DIR = path.resolve(import.meta.dirname, "../../build/components");

export interface ServiceChild {
  child: ServerChild;
  /** The service. */
  url: string;
  /** The bare CallTool RPC to the service's own pool (service-server.ts). */
  bareUrl: string;
}

/**
 * The service on `dataDir` (kept after it stops), with `env` on top of the bench's API key. Its
 * one workspace has the whole server, as in a single-tenant deployment
 * (SERVICE_WORKSPACE_REQUESTS_PER_SEC=0): throughput is measured, not the workspace's share.
 * BENCH_CPU_PROF=<dir> profiles it (the profile is written when it stops cleanly).
 */
export async function spawnService(dataDir: string, env: Record<string, string> = {}): Promise<ServiceChild> {
  const child = await spawnServer(path.join(import.meta.dirname, "service-server.ts"), {
    env: {
      SERVICE_API_KEYS: `bench=${BENCH_API_KEY}`,
      SERVICE_SHUTDOWN_GRACE_SECS: "1",
      SERVICE_WORKSPACE_REQUESTS_PER_SEC: "0",
      BENCH_DATA_DIR: dataDir,
      ...env,
    },
    execArgv: cpuProfileArgv(),
    startTimeoutMs: 60_000,
  });
  const [url, bareUrl] = child.url.split(" ") as [string, string];
  return { child, url, bareUrl };
}

/** The scripted model provider in its own process. */
export function spawnProvider(): Promise<ServerChild> {
  return spawnServer(path.join(import.meta.dirname, "provider-server.ts"));
}

/** BENCH_CPU_PROF=<dir> profiles a server child (its profile is written when it stops cleanly). */
export function cpuProfileArgv(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(dir)}`] : [];
}

/** Runs `work` with a starter whose children are all stopped afterwards, whatever happened. */
export async function withChildren<T>(work: (started: <C extends { stop(): Promise<void> }>(child: C) => C) => Promise<T>): Promise<T> {
  const children: { stop(): Promise<void> }[] = [];
  try {
    return await work((child) => (children.push(child), child));
  } finally {
    await Promise.all(children.map((child) => child.stop()));
  }
}

/** Connect, binary protobuf, over HTTP/2: one connection per transport. */
export function connectH2(baseUrl: string): Transport {
  return createNodeTransport({ baseUrl, apiKey: BENCH_API_KEY, protocol: "connect", httpVersion: "2", useBinaryFormat: true });
}

export function sessionClient(transport: Transport): Client<typeof SessionService> {
  return createClient(SessionService, transport);
}

export function runClient(transport: Transport): Client<typeof RunService> {
  return createClient(RunService, transport);
}

/** Admits build/components/<name>.wasm as a tool (or, with "agentloops", an agent loop) of the bench's workspace; returns its id. */
export async function admitTool(baseUrl: string, name: string, kind: "tools" | "agentloops" = "tools"): Promise<string> {
  const bytes = await fs.readFile(path.join(COMPONENTS_DIR, `${name}.wasm`));
  const response = await fetch(`${baseUrl}/v1/${kind}`, {
    method: "POST",
    headers: { authorization: `Bearer ${BENCH_API_KEY}`, "content-type": "application/wasm" },
    body: bytes,
  });
  if (response.status !== 200) throw new Error(`admitting ${name}: HTTP ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/** The tool's name in every bench session. */
export const ECHO = "echo";
export const ECHO_INPUT: JsonValue = { v: 1, text: "hello from the bench", n: 42 };

/** A session with one grant-less service environment and echo-wat placed in it as "echo". */
export function echoSession(toolId: string): MessageInitShape<typeof CreateSessionRequestSchema> {
  return {
    environments: [{ name: "sandbox", kind: { case: "service", value: {} } }],
    tools: [{ name: ECHO, description: "Echoes its input.", environment: "sandbox", implementation: { kind: { case: "tool", value: toolId } } }],
  };
}

export async function createEchoSession(client: Client<typeof SessionService>, toolId: string): Promise<string> {
  const { session } = await client.createSession(echoSession(toolId));
  if (session?.state !== "ready") throw new Error(`session ${session?.id}: state ${session?.state}, expected ready`);
  return session.id;
}

/**
 * CallTool of echo in `sessionId`, checked: anything but the input echoed back (pool_saturated,
 * a trap) fails the suite instead of passing for a fast call. `tool` is the placed tool's name
 * for the service, the tool's id for the bare pool RPC.
 */
export function echoCaller(client: Client<typeof SessionService>, sessionId: string, tool = ECHO): () => Promise<void> {
  const input = fromJson(ValueSchema, ECHO_INPUT);
  const expected = toJsonString(ValueSchema, input);
  return async () => {
    const { receipt } = await client.callTool({ sessionId, tool, input });
    const outcome = receipt?.outcome;
    if (outcome?.case !== "returned" || toJsonString(ValueSchema, outcome.value.output!) !== expected) {
      throw new Error(`CallTool ${tool}: unexpected receipt ${JSON.stringify(outcome?.case === "returned" ? "wrong output" : outcome?.value)}`);
    }
  };
}
