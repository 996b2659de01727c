// A well-behaved client's unary latency while hostile clients hold the server, beside the same
// client on the unloaded server: 200 silent connections, 200 that sent one byte of the HTTP/2
// preface, and 64 unauthenticated 31 MiB request bodies at all times (each reopened or resent as
// soon as the server is done with it). Loopback, bounded: a fixed number of calls per phase,
// paced so that a phase outlasts the server's default 10 s deadline on undecided connections.
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { createNodeTransport, createServiceClient } from "@skillenv/client/node";
import { BENCH_API_KEY, spawnServer, type ServerChild } from "./lib/child.ts";
import { MiB, summarize } from "./lib/stats.ts";
import type { ResultRow, Suite, SuiteReport } from "./lib/suite.ts";
import { pacedLatencies, startAttackers } from "./lib/attackers.ts";
import { noisyNeighbour } from "./noisy-neighbour.ts";

const SILENT_CONNECTIONS = 200;
const ONE_BYTE_CONNECTIONS = 200;
const LARGE_BODIES = 64;
/** Just under the default SERVICE_MAX_REQUEST_BYTES (32 MiB), so size alone would not refuse it. */
const BODY_BYTES = 31 * MiB;
const WARMUP_CALLS = 300;
const MEASURED_CALLS = 1500;
/** Pause between measured calls: a client with a steady trickle of calls, over 15 s or more. */
const PACE_MS = 10;
/** Time the hostile clients get to open their connections and start their bodies before measuring. */
const RAMP_UP_MS = 2_000;
/** Bounds a phase whose calls stall, so the suite ends either way. */
const PHASE_BUDGET_MS = 60_000;
const HOSTILE_ROLE = "hostile-clients";

/** What the hostile clients saw, reported when they stop. */
interface HostileStats {
  bodiesSent: number;
  bodyAnswers: Record<string, number>;
  silentClosedByServer: number;
  oneByteClosedByServer: number;
}

// The hostile clients run on their own thread (this file, as a worker), so their busy writing does
// not sit in the measured client's event loop.
if (!isMainThread && (workerData as { role?: string } | null)?.role === HOSTILE_ROLE) {
  runHostileClients((workerData as { url: string }).url);
}

function runHostileClients(url: string): void {
  const stats: HostileStats = { bodiesSent: 0, bodyAnswers: {}, silentClosedByServer: 0, oneByteClosedByServer: 0 };
  let stopping = false;
  const sockets = new Set<net.Socket>();
  const { hostname, port } = new URL(url);

  /** A connection that sends `firstBytes` (or nothing) and then waits; reopened whenever the server closes it. */
  function holdConnection(firstBytes: string, counted: "silentClosedByServer" | "oneByteClosedByServer"): void {
    const socket = net.connect(Number(port), hostname, () => socket.write(firstBytes));
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => {
      sockets.delete(socket);
      if (stopping) return;
      stats[counted]++;
      holdConnection(firstBytes, counted);
    });
  }

  const head = Buffer.from(`POST /assets/presign HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`);
  const chunk = Buffer.alloc(MiB, " ");
  /**
   * A keep-alive connection that sends one unauthenticated large body after another, each in full
   * whatever the server answers (raw TCP: Node's HTTP client stops writing once it has an answer).
   */
  function sendBodies(): void {
    const socket = net.connect(Number(port), hostname);
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("data", (data: Buffer) => {
      for (const [, status] of data.toString("latin1").matchAll(/HTTP\/1\.1 (\d{3}) /g)) {
        stats.bodyAnswers[status!] = (stats.bodyAnswers[status!] ?? 0) + 1;
      }
    });
    // Not events.once: that rejects on "error", and a write error is just the end of this round.
    const closed = new Promise<void>((resolve) => socket.once("close", resolve)).then(() => {
      sockets.delete(socket);
      if (!stopping) sendBodies();
    });
    const writable = () => Promise.race([new Promise((resolve) => socket.once("drain", resolve)), closed]);
    socket.once("connect", async () => {
      while (!socket.destroyed) {
        stats.bodiesSent++;
        socket.write(head);
        for (let sent = 0; sent < BODY_BYTES && !socket.destroyed; sent += chunk.byteLength) {
          if (!socket.write(chunk)) await writable();
        }
      }
    });
  }

  for (let i = 0; i < SILENT_CONNECTIONS; i++) holdConnection("", "silentClosedByServer");
  for (let i = 0; i < ONE_BYTE_CONNECTIONS; i++) holdConnection("P", "oneByteClosedByServer");
  for (let i = 0; i < LARGE_BODIES; i++) sendBodies();
  parentPort!.postMessage("started");
  parentPort!.once("message", () => {
    stopping = true;
    for (const socket of sockets) socket.destroy();
    parentPort!.postMessage(stats);
  });
}

/** Highest resident set size of a process while sampling (Linux /proc); undefined elsewhere. */
function sampleRss(pid: number): { stop(): number | undefined } {
  let peakKiB: number | undefined;
  const sample = () => {
    try {
      const kib = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
      if (Number.isFinite(kib)) peakKiB = Math.max(peakKiB ?? 0, kib);
    } catch {
      // Not Linux: no samples.
    }
  };
  sample();
  const timer = setInterval(sample, 50);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return peakKiB === undefined ? undefined : peakKiB / 1024;
    },
  };
}

/** Warm-up, then MEASURED_CALLS paced Presign round trips, with server RSS sampled throughout. */
async function measurePhase(name: string, server: ServerChild, call: () => Promise<void>): Promise<ResultRow> {
  const rss = sampleRss(server.pid);
  const serverBefore = await server.stats();
  const clientBefore = process.cpuUsage();
  const { latenciesMs, calls } = await pacedLatencies(call, { warmup: WARMUP_CALLS, measured: MEASURED_CALLS, paceMs: PACE_MS, budgetMs: PHASE_BUDGET_MS });
  const client = process.cpuUsage(clientBefore);
  const serverAfter = await server.stats();
  const s = summarize(latenciesMs);
  return {
    name,
    n: s.n,
    medianMs: s.medianMs,
    p99Ms: s.p99Ms,
    callsPerSec: Number.NaN,
    serverRssMiB: rss.stop() ?? serverAfter.rssBytes / MiB,
    serverCpuUs: (serverAfter.cpuMicros - serverBefore.cpuMicros) / calls,
    clientCpuUs: (client.user + client.system) / calls,
  };
}

function startHostileClients(url: string): Promise<{ stop(): Promise<HostileStats> }> {
  return startAttackers<HostileStats>(new URL(import.meta.url), HOSTILE_ROLE, url, "the hostile clients");
}

async function run(): Promise<SuiteReport> {
  const connections = await connectionAttacks();
  const dataDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-noisy-"));
  try {
    const neighbour = await noisyNeighbour(dataDir);
    return { rows: [...connections.rows, ...neighbour.rows], notes: [...connections.notes, "", ...neighbour.notes] };
  } finally {
    await fs.promises.rm(dataDir, { recursive: true, force: true });
  }
}

/** The first part: a client's Presign beside hostile connections and bodies. */
async function connectionAttacks(): Promise<SuiteReport> {
  const server = await spawnServer(new URL("./servers/service.ts", import.meta.url).pathname, {
    env: { SERVICE_API_KEYS: `bench=${BENCH_API_KEY}`, SERVICE_SHUTDOWN_GRACE_SECS: "1" },
  });
  try {
    const client = createServiceClient(
      createNodeTransport({ baseUrl: server.url, apiKey: BENCH_API_KEY, protocol: "connect", httpVersion: "2", useBinaryFormat: true }),
    );
    const bytes = randomBytes(1024);
    await client.uploadAsset(bytes);
    const request = { sha256: createHash("sha256").update(bytes).digest("hex"), sizeBytes: BigInt(bytes.byteLength) };
    const call = async () => {
      // Checked on every call: a refusal or a miss would measure the wrong path.
      if (!(await client.assets.presign(request)).exists) throw new Error("presign: expected a dedup hit");
    };

    const unloaded = await measurePhase("connect binary (h2), unloaded", server, call);
    const hostile = await startHostileClients(server.url);
    await sleep(RAMP_UP_MS);
    let loaded: ResultRow;
    let stats: HostileStats;
    try {
      loaded = await measurePhase("connect binary (h2), hostile load", server, call);
    } finally {
      stats = await hostile.stop();
    }
    const ratio = (key: "medianMs" | "p99Ms") => (loaded[key] / unloaded[key]).toFixed(2);
    const answers = Object.entries(stats.bodyAnswers)
      .map(([status, count]) => `${count} x ${status}`)
      .join(", ");
    return {
      rows: [unloaded, loaded],
      notes: [
        `hostile load: ${SILENT_CONNECTIONS} silent + ${ONE_BYTE_CONNECTIONS} one-byte connections, ${LARGE_BODIES} unauthenticated ${BODY_BYTES / MiB} MiB bodies at a time`,
        `latency under hostile load / unloaded: p50 ${ratio("medianMs")}x, p99 ${ratio("p99Ms")}x`,
        `server peak RSS (MiB, sampled every 50 ms): unloaded ${unloaded.serverRssMiB.toFixed(1)}, hostile ${loaded.serverRssMiB.toFixed(1)}`,
        `hostile bodies sent: ${stats.bodiesSent}; answers: ${answers || "none"}`,
        `hostile connections the server closed (then reopened): silent ${stats.silentClosedByServer}, one-byte ${stats.oneByteClosedByServer}`,
        `(under load, server CPU per call includes refusing the hostile traffic, and client CPU includes the hostile clients' thread)`,
      ],
    };
  } finally {
    await server.stop();
  }
}

export const hostileSuite: Suite = {
  name: "hostile",
  title: `Unary Presign (dedup hit) beside hostile clients: ${MEASURED_CALLS} round trips per phase, ${PACE_MS} ms apart; then one workspace's CallTool while another floods the service`,
  run,
};
