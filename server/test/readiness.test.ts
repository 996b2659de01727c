// Liveness and readiness (docs/operations.md, "Health and readiness"): the HTTP probes load
// balancers use and the gRPC health service, while the server starts, once it is ready, when its
// metadata store goes away, and as it drains.
import * as fs from "node:fs/promises";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { HealthState } from "../src/health/index.ts";
import { startPostgres, type TestPostgres } from "./helpers/postgres.ts";
import { spawnService } from "./helpers/process.ts";
import { KEY_A, startTestService } from "./helpers/service.ts";

const probe = async (url: string, pathname: string, method = "GET") => {
  const response = await fetch(`${url}${pathname}`, { method });
  return { status: response.status, body: method === "HEAD" ? undefined : await response.json(), cacheControl: response.headers.get("cache-control") };
};
const healthOf = (url: string) => createClient(Health, createGrpcTransport({ baseUrl: url }));

describe("a started server", () => {
  it("is live and ready on both probes and the gRPC health service, and stops being ready as it drains", async () => {
    const service = await startTestService();
    let closed = false;
    try {
      expect(await probe(service.url, "/livez")).toEqual({ status: 200, body: { status: "live" }, cacheControl: "no-store" });
      expect(await probe(service.url, "/readyz")).toEqual({ status: 200, body: { status: "ready" }, cacheControl: "no-store" });
      expect((await probe(service.url, "/readyz", "HEAD")).status).toBe(200);
      const health = healthOf(service.url);
      expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
      expect((await health.check({ service: "skillenv.sessions.v1.SessionService" })).status).toBe(Status.SERVING);

      // A watch sees the drain begin, then ends.
      const seen: Status[] = [];
      let firstSeen!: () => void;
      const first = new Promise<void>((resolve) => (firstSeen = resolve));
      const watching = (async () => {
        for await (const { status } of health.watch({ service: "" })) {
          seen.push(status);
          firstSeen();
        }
      })();
      await first;
      closed = true;
      await service.close();
      await watching;
      expect(seen).toEqual([Status.SERVING, Status.NOT_SERVING]);
    } finally {
      if (!closed) await service.close();
    }
  }, 60_000);
});

describe("a server still starting", () => {
  let dataDir: string;
  let silent: net.Server;
  const held: net.Socket[] = [];

  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-readiness-"));
    // A "database" that accepts connections and never answers: the server's start waits on it.
    silent = net.createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", () => resolve()));
  });
  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it("answers the probes, live and not ready, and refuses every API call unavailable", async () => {
    const port = (silent.address() as net.AddressInfo).port;
    const starting = await spawnService(
      { SERVICE_DATA_DIR: dataDir, SERVICE_API_KEYS: `a=${KEY_A}`, SERVICE_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres` },
      { until: "port-open" },
    );
    try {
      // The start is waiting on storage, which never answers: the state below cannot change.
      expect(await probe(starting.url, "/livez")).toMatchObject({ status: 200, body: { status: "live" } });
      expect(await probe(starting.url, "/readyz")).toMatchObject({ status: 503, body: { status: "starting" } });
      const refused = await fetch(`${starting.url}/v1/sessions`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({ code: "unavailable", message: expect.stringContaining("starting") });
      await expect(healthOf(starting.url).check({ service: "" })).rejects.toMatchObject({ code: 14 /* Unavailable */ });
      expect(starting.stderr()).not.toContain("listening on");
    } finally {
      starting.child.kill("SIGKILL");
      await starting.exited;
    }
  }, 60_000);
});

describe("a server whose PostgreSQL goes away", () => {
  let postgres: TestPostgres;

  beforeAll(async () => {
    postgres = await startPostgres();
  }, 60_000);
  afterAll(() => postgres?.stop());

  it("stops being ready at the first call that fails on storage, and stays live", async () => {
    const service = await startTestService({ SERVICE_DATABASE_URL: await postgres.createDatabase() });
    try {
      expect(await probe(service.url, "/readyz")).toMatchObject({ status: 200, body: { status: "ready" } });
      await postgres.stop();
      const failed = await fetch(`${service.url}/v1/sessions`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(await failed.json()).toMatchObject({ code: "storage_unavailable" });
      expect(await probe(service.url, "/readyz")).toMatchObject({ status: 503, body: { status: "storage_unreachable" } });
      expect(await probe(service.url, "/livez")).toMatchObject({ status: 200 });
      expect((await healthOf(service.url).check({ service: "" })).status).toBe(Status.NOT_SERVING);
    } finally {
      await service.close();
    }
  }, 60_000);
});

describe("the readiness state", () => {
  it("is starting, then ready; a storage failure holds until a probe succeeds; draining is for good", async () => {
    const health = new HealthState(["svc"]);
    let storeAnswers = true;
    health.watchStorage(async () => {
      if (!storeAnswers) throw new Error("unreachable");
    });
    expect(health.readiness()).toBe("starting");
    health.started();
    expect(health.readiness()).toBe("ready");
    health.storageFailed();
    expect(health.readiness()).toBe("storage_unreachable");
    expect(health.status("svc")).toBe(Status.NOT_SERVING);
    storeAnswers = false;
    await health.probeStorage();
    expect(health.readiness()).toBe("storage_unreachable");
    storeAnswers = true;
    await health.probeStorage();
    expect(health.readiness()).toBe("ready");
    expect(health.status("svc")).toBe(Status.SERVING);
    health.setNotServing();
    await health.probeStorage();
    expect(health.readiness()).toBe("draining");
    expect(health.status("other")).toBe(Status.SERVICE_UNKNOWN);
  });
});
