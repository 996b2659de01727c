// Each workspace's share of the server (SERVICE_WORKSPACE_REQUESTS_PER_SEC, issue #18): a workspace
// past it is refused workspace_rate_limited in every protocol, before anything of its request runs,
// large responses count for their bytes, and another workspace is never refused for it.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { CreateSessionResponseSchema } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { RESPONSE_BYTES_PER_REQUEST, WorkspaceRateLimiter } from "../src/auth/index.ts";
import { KEY_A, KEY_B, bearer, startTestService, type TestService } from "./helpers/service.ts";
import { sessionClient } from "./helpers/sessions.ts";

const KEY_C = "key-for-workspace-c-0003";
const root = path.resolve(import.meta.dirname, "../..");
const laptop = { name: "laptop", kind: { case: "host" as const, value: {} } };

/** The stable code and retryAfterSecs of a refused Connect call. */
async function refusal(call: Promise<unknown>): Promise<{ code: Code; reason: string | undefined; retryAfterSecs: number }> {
  try {
    await call;
  } catch (error) {
    const connectError = ConnectError.from(error);
    const info = connectError.findDetails(ErrorInfoSchema)[0];
    return { code: connectError.code, reason: info?.reason, retryAfterSecs: Number(info?.metadata.retryAfterSecs) };
  }
  throw new Error("expected the call to be refused");
}

describe("each workspace's share of the server", () => {
  let service: TestService;
  let grpcClient: grpc.Client;
  beforeAll(async () => {
    const definition = protoLoader.loadSync(path.join(root, "proto/skillenv/sessions/v1/sessions.proto"), {
      includeDirs: [path.join(root, "proto"), path.join(root, "third_party")],
    });
    const loaded = grpc.loadPackageDefinition(definition) as any;
    // One request a second, five at once: a test spends a workspace's bucket in a few calls, and
    // it does not refill by itself within the test.
    service = await startTestService({
      SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B},c=${KEY_C}`,
      SERVICE_WORKSPACE_REQUESTS_PER_SEC: "1",
      SERVICE_WORKSPACE_REQUEST_BURST: "5",
    });
    grpcClient = new loaded.skillenv.sessions.v1.SessionService(new URL(service.url).host, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    grpcClient?.close();
    await service?.close();
  });

  it("refuses a workspace past its burst with workspace_rate_limited in Connect, gRPC and REST, creating nothing, while another workspace is served", async () => {
    const a = sessionClient(service.url, KEY_A);
    const created: string[] = [];
    let refused: Awaited<ReturnType<typeof refusal>> | undefined;
    // The bucket holds five; each admitted call takes one and the refill is one a second.
    for (let i = 0; i < 50 && !refused; i++) {
      try {
        const { session } = await a.createSession({ environments: [laptop] });
        created.push(session!.id);
      } catch (error) {
        refused = await refusal(Promise.reject(error));
      }
    }
    expect(created.length).toBeGreaterThanOrEqual(5);
    expect(refused).toMatchObject({ code: Code.ResourceExhausted, reason: "workspace_rate_limited" });
    expect(refused!.retryAfterSecs).toBeGreaterThanOrEqual(1);

    // The same refusal over REST (429, Retry-After, the JSON error body) and over gRPC from a client
    // built from the protos (RESOURCE_EXHAUSTED with the ErrorInfo). Reads, each tried until
    // refused: a token that refilled meanwhile admits one, harmlessly.
    let rest: Response | undefined;
    for (let i = 0; i < 10 && rest?.status !== 429; i++) rest = await fetch(`${service.url}/v1/sessions`, { headers: bearer(KEY_A) });
    expect(rest!.status).toBe(429);
    expect(Number(rest!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await rest!.json()).toMatchObject({ code: "workspace_rate_limited", status: "resource_exhausted" });

    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${KEY_A}`);
    let failure: grpc.ServiceError | null = null;
    for (let i = 0; i < 10 && !failure; i++)
      failure = await new Promise((resolve) => (grpcClient as any).listSessions({}, metadata, (error: grpc.ServiceError | null) => resolve(error)));
    expect(failure!.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const status = fromBinary(StatusSchema, failure!.metadata.get("grpc-status-details-bin")[0] as Buffer);
    expect(fromBinary(ErrorInfoSchema, status.details[0]!.value).reason).toBe("workspace_rate_limited");

    // Workspace B, on the same server at the same moment, is served.
    const b = sessionClient(service.url, KEY_B);
    expect((await b.createSession({ environments: [laptop] })).session?.id).toMatch(/.+/);

    // Once its bucket has refilled, A finds exactly the sessions it was told were created: the
    // refused calls created nothing.
    const listed = await vi.waitFor(() => a.listSessions({ pageSize: 100 }), { timeout: 30_000, interval: 1_000 });
    expect(listed.sessions.map((session) => session.id).sort()).toEqual([...created].sort());
  }, 60_000);

  it("charges a large response for its bytes: a workspace sent most of a megabyte is refused its next call", async () => {
    const c = sessionClient(service.url, KEY_C);
    // A session of about 720 KB (twelve tools with 60 KB schemas), which its creation answers in full.
    const schema = { type: "object", description: "d".repeat(60_000) };
    const created = await c.createSession({
      environments: [laptop],
      tools: Array.from({ length: 12 }, (_, i) => ({ name: `t${i}`, environment: "laptop", inputSchema: schema })),
    });
    // One token to be admitted, and one more per 64 KiB of the answer once it was sent.
    const cost = Math.floor(toBinary(CreateSessionResponseSchema, created).byteLength / RESPONSE_BYTES_PER_REQUEST);
    expect(cost).toBeGreaterThanOrEqual(10);
    // Counting requests alone, four of the five tokens would be left; the bytes took them all.
    const refused = await refusal(c.getSession({ sessionId: created.session!.id }));
    expect(refused).toMatchObject({ code: Code.ResourceExhausted, reason: "workspace_rate_limited" });
    expect(refused.retryAfterSecs).toBeGreaterThan(1);
  });
});

/**
 * A service (started before the describe's tests, stopped after them) where each workspace's
 * share is one request a second, one at once, and a refusal is held a minute, one at a time; and
 * how many refusals it holds now.
 */
function floodedService(): { service: () => TestService; held: () => Promise<number> } {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      SERVICE_API_KEYS: `a=${KEY_A},b=${KEY_B}`,
      SERVICE_WORKSPACE_REQUESTS_PER_SEC: "1",
      SERVICE_WORKSPACE_REQUEST_BURST: "1",
      SERVICE_WORKSPACE_REFUSAL_HOLD_MS: "60000",
      SERVICE_WORKSPACE_MAX_HELD_REFUSALS: "1",
      SERVICE_METRICS_LISTEN: "127.0.0.1:0",
    });
  });
  afterAll(async () => {
    await service?.close();
  });
  return {
    service: () => service,
    held: async () => Number(/^skillenv_workspace_refusals_held (\d+)$/m.exec(await (await fetch(`${service.metricsUrl}/metrics`)).text())?.[1]),
  };
}

describe("a workspace past its share, flooding", () => {
  const { service, held } = floodedService();

  it("has its refusal held, the next one answered at once past the held limit, while another workspace is served; a client that leaves is let go", async () => {
    const a = sessionClient(service().url, KEY_A);
    await a.listSessions({});
    const leaving = new AbortController();
    let heldAnswered = false;
    const first = a.listSessions({}, { signal: leaving.signal }).finally(() => (heldAnswered = true));
    const firstRefusal = first.then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    await vi.waitFor(async () => expect(await held()).toBe(1), { timeout: 10_000, interval: 50 });
    // Past the one held refusal: answered at once, with the same code.
    expect(await refusal(a.listSessions({}))).toMatchObject({ code: Code.ResourceExhausted, reason: "workspace_rate_limited" });
    const b = sessionClient(service().url, KEY_B);
    expect((await b.createSession({ environments: [laptop] })).session?.id).toMatch(/.+/);
    // The held one still waits (for at least half a minute).
    expect(heldAnswered).toBe(false);
    leaving.abort();
    expect((await firstRefusal)?.code).toBe(Code.Canceled);
    await vi.waitFor(async () => expect(await held()).toBe(0), { timeout: 10_000, interval: 50 });
  });
});

describe("a workspace past its share on the MCP endpoints", () => {
  const { service, held } = floodedService();
  const ping = (key: string, signal?: AbortSignal) =>
    fetch(`${service().url}/mcp`, {
      method: "POST",
      headers: { ...bearer(key), "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      ...(signal ? { signal } : {}),
    });

  it("has its refusal held as the API's are, the next one answered at once past the held limit, while another workspace is served", async () => {
    expect((await ping(KEY_A)).status).toBe(200);
    const leaving = new AbortController();
    let heldAnswered = false;
    const first = ping(KEY_A, leaving.signal).finally(() => (heldAnswered = true));
    const firstOutcome = first.then(
      (response) => response.status,
      (error: unknown) => (error as Error).name,
    );
    await vi.waitFor(async () => expect(await held()).toBe(1), { timeout: 10_000, interval: 50 });
    // Past the one held refusal: answered at once, with the same code and when to retry.
    const past = await ping(KEY_A);
    expect(past.status).toBe(429);
    expect(past.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(await past.json()).toMatchObject({ code: "workspace_rate_limited" });
    expect((await ping(KEY_B)).status).toBe(200);
    expect(heldAnswered).toBe(false);
    // A client that leaves is let go at once.
    leaving.abort();
    expect(await firstOutcome).toBe("AbortError");
    await vi.waitFor(async () => expect(await held()).toBe(0), { timeout: 10_000, interval: 50 });
  });
});

describe("WorkspaceRateLimiter", () => {
  afterEach(() => vi.useRealTimers());

  it("admits a burst, then one request per 1/rate seconds, per workspace, and makes a large response's bytes owed", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const limiter = new WorkspaceRateLimiter({ requestsPerSec: 2, burst: 3, holdMs: 0, maxHeld: 1 });
    for (let i = 0; i < 3; i++) limiter.admit("a");
    const refused = (() => {
      try {
        limiter.admit("a");
      } catch (error) {
        return ConnectError.from(error);
      }
      return undefined;
    })();
    expect(refused?.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: "workspace_rate_limited", metadata: { retryAfterSecs: "1" } });
    expect(refused?.metadata.get("retry-after")).toBe("1");
    // Another workspace has its own bucket.
    limiter.admit("b");
    // Half a second refills one request.
    vi.advanceTimersByTime(500);
    limiter.admit("a");
    expect(() => limiter.admit("a")).toThrow(/share of the server/);
    // A full bucket (3) less a response of 6 x 64 KiB owes 3: two seconds at two a second until the next request.
    vi.advanceTimersByTime(1_500);
    limiter.charge("a", 6 * RESPONSE_BYTES_PER_REQUEST + 1);
    expect(() => limiter.admit("a")).toThrow(/retry in 2 s/);
    vi.advanceTimersByTime(2_000);
    limiter.admit("a");
  });

  it("holds a refusal between half of holdMs and all of it, answers at once past maxHeld, and at once when the client leaves", async () => {
    vi.useFakeTimers({ toFake: ["performance", "setTimeout", "clearTimeout"] });
    const limiter = new WorkspaceRateLimiter({ requestsPerSec: 1, burst: 1, holdMs: 1000, maxHeld: 2 });
    const client = new AbortController();
    expect(limiter.admitOrHold("a", client.signal)).toBeUndefined();
    const settled: string[] = [];
    const hold = (name: string, signal = client.signal) => {
      const held = limiter.admitOrHold("a", signal)!;
      expect(held).toBeInstanceOf(Promise);
      held.catch((error: unknown) => settled.push(`${name}: ${ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason}`));
    };
    hold("first");
    const leaving = new AbortController();
    hold("second", leaving.signal);
    expect(limiter.heldInAll()).toBe(2);
    // Past maxHeld: refused at once, not held. Another workspace is admitted meanwhile.
    expect(() => limiter.admitOrHold("a", client.signal)).toThrow(/share of the server/);
    expect(limiter.admitOrHold("b", client.signal)).toBeUndefined();
    // A client that leaves is answered at once.
    leaving.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toEqual(["second: workspace_rate_limited"]);
    expect(limiter.heldInAll()).toBe(1);
    // Not before half of holdMs; by holdMs.
    await vi.advanceTimersByTimeAsync(499);
    expect(settled).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(501);
    expect(settled).toEqual(["second: workspace_rate_limited", "first: workspace_rate_limited"]);
    expect(limiter.heldInAll()).toBe(0);
  });

  it("answers at once with holdMs 0", () => {
    const limiter = new WorkspaceRateLimiter({ requestsPerSec: 1, burst: 1, holdMs: 0, maxHeld: 256 });
    const signal = new AbortController().signal;
    limiter.admitOrHold("a", signal);
    expect(() => limiter.admitOrHold("a", signal)).toThrow(/share of the server/);
    expect(limiter.heldInAll()).toBe(0);
  });

  it("is off at a rate of 0", () => {
    const limiter = new WorkspaceRateLimiter({ requestsPerSec: 0, burst: 0, holdMs: 1000, maxHeld: 1 });
    for (let i = 0; i < 1000; i++) limiter.admit("a");
    limiter.charge("a", 1 << 30);
    limiter.admit("a");
  });
});
