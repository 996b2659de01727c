// Unary round trip and throughput of each wire protocol the service speaks, against a bare
// node:http2 round trip measured in the same run (same machine state, same process layout).
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import * as http2 from "node:http2";
import * as path from "node:path";
import * as v8 from "node:v8";
import * as vm from "node:vm";
import { createNodeTransport, createServiceClient, type NodeTransportOptions } from "@skillenv/client/node";
import { BENCH_API_KEY, withServiceBesideBaseline } from "./lib/child.ts";
import { MiB, summarize, throughput } from "./lib/stats.ts";
import type { ResultRow, Suite, SuiteReport } from "./lib/suite.ts";
import { measure, type Workload } from "./lib/timing.ts";

const WORK: Workload = { warmup: 300, sequential: 2000, concurrent: 5000, inFlight: 64, phaseBudgetMs: 8_000 };

interface Caller {
  call(): Promise<void>;
  close(): void;
}

interface Target {
  name: string;
  server: "service" | "bare";
  open(url: string, asset: Asset): Promise<Caller>;
}

/** Content the workspace has already finalized: Presign on it is a dedup hit (auth + one LevelDB read). */
interface Asset {
  sha256: string;
  sizeBytes: number;
}

function connectClient(options: Omit<NodeTransportOptions, "baseUrl" | "apiKey">): Target["open"] {
  return async (url, asset) => {
    const client = createServiceClient(createNodeTransport({ baseUrl: url, apiKey: BENCH_API_KEY, ...options }));
    const request = { sha256: asset.sha256, sizeBytes: BigInt(asset.sizeBytes) };
    return {
      async call() {
        // Checked on every call: a refusal or a miss would measure the wrong path.
        if (!(await client.assets.presign(request)).exists) throw new Error("presign: expected a dedup hit");
      },
      // connect-node exposes no close; the server child closes the connections when it stops.
      close() {},
    };
  };
}

const TARGETS: Target[] = [
  {
    name: "bare http2 (baseline)",
    server: "bare",
    async open(url) {
      const session = http2.connect(url);
      await once(session, "connect");
      const body = Buffer.from(JSON.stringify({ sha256: "0".repeat(64), sizeBytes: 1024 }));
      return {
        call: () =>
          new Promise<void>((resolve, reject) => {
            const stream = session.request({ ":method": "POST", ":path": "/", "content-type": "application/octet-stream" });
            stream.on("data", () => {});
            stream.once("end", resolve);
            stream.once("error", reject);
            stream.end(body);
          }),
        close: () => session.close(),
      };
    },
  },
  { name: "grpc (h2)", server: "service", open: connectClient({ protocol: "grpc", httpVersion: "2" }) },
  { name: "connect binary (h2)", server: "service", open: connectClient({ protocol: "connect", httpVersion: "2", useBinaryFormat: true }) },
  { name: "connect json (http/1.1)", server: "service", open: connectClient({ protocol: "connect", httpVersion: "1.1", useBinaryFormat: false }) },
  { name: "grpc-web binary (http/1.1)", server: "service", open: connectClient({ protocol: "grpc-web", httpVersion: "1.1", useBinaryFormat: true }) },
  {
    name: "rest json (fetch, http/1.1)",
    server: "service",
    async open(url, asset) {
      const init: RequestInit = {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${BENCH_API_KEY}` },
        body: JSON.stringify({ sha256: asset.sha256, sizeBytes: asset.sizeBytes }),
      };
      return {
        async call() {
          const response = await fetch(`${url}/assets/presign`, init);
          const body = (await response.json()) as { exists?: boolean };
          if (!response.ok || body.exists !== true) throw new Error(`REST presign: HTTP ${response.status} ${JSON.stringify(body)}`);
        },
        close() {},
      };
    },
  },
];

// A forced GC before reading the client heap makes before/after comparable (live data, not
// garbage timing). `npm run bench` runs plain `node`, so expose gc at runtime instead of a flag.
v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;
function clientHeapMiB(): number {
  gc();
  return process.memoryUsage().heapUsed / MiB;
}

async function run(): Promise<SuiteReport> {
  const heapBefore = clientHeapMiB();
  // BENCH_CPU_PROF=<dir> profiles the service child (written when it exits cleanly).
  const profDir = process.env.BENCH_CPU_PROF;
  const profArgv = profDir ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(profDir)}`] : [];
  const bareScript = path.join(import.meta.dirname, "servers/bare-http2.ts");
  return withServiceBesideBaseline(bareScript, profArgv, async ({ service, baseline: bare }) => {
    const before = { service: await service.stats(), bare: await bare.stats() };

    const bytes = randomBytes(1024);
    const asset = { sha256: createHash("sha256").update(bytes).digest("hex"), sizeBytes: bytes.byteLength };
    await createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: BENCH_API_KEY })).uploadAsset(bytes);

    const rows: ResultRow[] = [];
    const truncated: string[] = [];
    for (const target of TARGETS) {
      const server = target.server === "service" ? service : bare;
      const startedAt = performance.now();
      const caller = await target.open(server.url, asset);
      try {
        const serverBefore = await server.stats();
        const clientBefore = process.cpuUsage();
        const m = await measure(caller.call, WORK);
        const client = process.cpuUsage(clientBefore);
        const serverAfter = await server.stats();
        const s = summarize(m.latenciesMs);
        if (s.n < WORK.sequential || m.concurrentCalls < WORK.concurrent) truncated.push(target.name);
        rows.push({
          name: target.name,
          n: s.n,
          medianMs: s.medianMs,
          p99Ms: s.p99Ms,
          callsPerSec: throughput(m.concurrentCalls, m.concurrentMs),
          serverRssMiB: serverAfter.rssBytes / MiB,
          serverCpuUs: (serverAfter.cpuMicros - serverBefore.cpuMicros) / m.calls,
          clientCpuUs: (client.user + client.system) / m.calls,
        });
      } finally {
        caller.close();
      }
      process.stderr.write(`  ${target.name}: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
    }

    const heapAfter = clientHeapMiB();
    const after = { service: await service.stats(), bare: await bare.stats() };
    const mib = (bytes: number) => (bytes / MiB).toFixed(1);
    const median = (name: string) => rows.find((row) => row.name === name)!.medianMs;
    const base = median("bare http2 (baseline)");
    const ratio = (name: string) => median(name) / base;
    const ratios = ["connect binary (h2)", "grpc (h2)"].map((name) => `${name} ${ratio(name).toFixed(2)}x`);
    const met = ratio("connect binary (h2)") <= 2 && ratio("grpc (h2)") <= 2;
    return {
      rows,
      notes: [
        `memory (before -> after, MiB): service RSS ${mib(before.service.rssBytes)} -> ${mib(after.service.rssBytes)}, heap after gc ${mib(before.service.heapUsedBytes)} -> ${mib(after.service.heapUsedBytes)}; ` +
          `bare http2 RSS ${mib(before.bare.rssBytes)} -> ${mib(after.bare.rssBytes)}; client heap after gc ${heapBefore.toFixed(1)} -> ${heapAfter.toFixed(1)}`,
        `median vs bare http2 (${base.toFixed(3)} ms): ${ratios.join(", ")} of bare http2; target <= 2x: ${met ? "met" : "MISSED"}`,
        ...(truncated.length > 0 ? [`cut short by the ${WORK.phaseBudgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
      ],
    };
  });
}

export const protocolsSuite: Suite = {
  name: "protocols",
  title: `Unary Presign (dedup hit) per protocol: ${WORK.sequential} sequential round trips, ${WORK.concurrent} calls with ${WORK.inFlight} in flight`,
  run,
};
