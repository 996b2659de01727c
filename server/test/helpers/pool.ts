import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Pool, type ComponentRef, type Invocation, type PoolOptions, type Receipt, type ServiceGrants } from "../../src/engine/pool/index.ts";

const root = resolve(import.meta.dirname, "../../..");
export const COMPONENTS_DIR = join(root, "build", "components");

/** Builds build/components/*.wasm (a no-op when their stamps are current). */
export async function buildTestComponents(): Promise<void> {
  const { buildComponents } = await import("../../../scripts/build-components.ts");
  await buildComponents({ log: () => undefined });
}

/** A component of build/components by name; `loads` counts how often its bytes were fetched. */
export function component(name: string): ComponentRef & { loads: number } {
  const ref = {
    id: name,
    loads: 0,
    load: async () => {
      ref.loads++;
      return readFile(join(COMPONENTS_DIR, `${name}.wasm`));
    },
  };
  return ref;
}

/**
 * Prepared components outlive test files in this directory (keyed by toolchain), so each file
 * does not transpile the same JS components again. Tests about preparation use their own.
 */
export const SHARED_DATA_DIR = join(tmpdir(), "skillenv-pool-tests");

export async function tempDir(prefix: string): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

export const NO_GRANTS: ServiceGrants = { filesystem: {}, network: [], secrets: [] };

export function poolOptions(overrides: Partial<PoolOptions> = {}): PoolOptions {
  return {
    workers: 2,
    dataDir: SHARED_DATA_DIR,
    fuel: 10_000_000_000,
    memoryMib: 256,
    maxTurnSecs: 60,
    agentLoopSlotsPerWorker: 4,
    toolSlotsPerWorker: 2,
    ...overrides,
  };
}

export function startPool(overrides: Partial<PoolOptions> = {}): Promise<Pool> {
  return Pool.start(poolOptions(overrides));
}

/** A tool call with no grants and a 30 s deadline unless overridden. */
export function run(pool: Pool, ref: ComponentRef, input: unknown, extra: Partial<Invocation> = {}): Promise<Receipt> {
  return pool.invoke({
    component: ref,
    entrypoint: "run",
    input: typeof input === "string" ? input : JSON.stringify(input),
    configuration: "{}",
    deadlineMs: Date.now() + 30_000,
    grants: NO_GRANTS,
    ...extra,
  });
}

export function output(receipt: Receipt): unknown {
  if (receipt.outcome !== "returned") throw new Error(`expected a returned receipt, got ${JSON.stringify(receipt)}`);
  return JSON.parse(receipt.output);
}

/** Polls until `check` holds (or fails after `timeoutMs`). */
export async function waitFor(check: () => boolean, timeoutMs = 10_000, what = "condition"): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Kills worker `index` of the pool as a crash would (SIGKILL to its sandbox, which takes every
 * process inside with it): its in-flight invocations end `unknown`.
 */
export function killWorker(pool: Pool, index: number): void {
  const pid = pool.stats().workers[index]?.pid;
  if (pid === undefined) throw new Error(`worker ${index} has no process`);
  process.kill(pid, "SIGKILL");
}

/** An HTTP server on loopback for guests' requests: it answers at once, or holds what it is told to. */
export interface GuestFacingServer {
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** Every request, as `METHOD /path`. */
  requests: string[];
  /** Waits until a request for `path` is held (bounded: a hang fails the test); returns what answers it. */
  held(path: string): Promise<() => void>;
  close(): Promise<void>;
}

/** Answers every request with `{"pong": <path>}`, except paths starting with `holdPrefix`, held until released. */
export async function startGuestFacingServer(holdPrefix: string): Promise<GuestFacingServer> {
  const requests: string[] = [];
  const holding = new Map<string, () => void>();
  const server = createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    const answer = () => response.end(JSON.stringify({ pong: request.url }));
    if (request.url?.startsWith(holdPrefix)) holding.set(request.url, answer);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    async held(path) {
      await waitFor(() => holding.has(path), 30_000, `the request for ${path}`);
      return holding.get(path)!;
    },
    async close() {
      for (const answer of holding.values()) answer();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
