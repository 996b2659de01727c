// Sessions (issue #8): CallTool of echo-wat through a session and its journal, from this process
// to the service in a child process (Connect, binary protobuf, HTTP/2, as in the protocols
// suite), beside two baselines measured in the same run, all three in interleaved rounds:
//   - the same CallTool RPC answered by a bare Connect server inside the service process that
//     hands the input straight to the service's own worker pool (lib/service-server.ts): same
//     client, wire format, process, pool and prepared component, without the service's HTTP
//     layer (auth gate, request log, body budget), the session (lookup, checks, binding) and the
//     journal. CallTool minus this baseline is the "journal + session overhead" of the issue;
//   - the journal alone: Journal.send + Journal.settle, the two synced LevelDB batches that
//     runJournaled writes around every call, on a LevelStore in this process (same filesystem).
// Then journal bytes per call, from the LevelDB directory (see journalBytes below).
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Level } from "level";
import { returned } from "../server/src/environments/index.ts";
import { newId } from "../server/src/ids/index.ts";
import { Journal, type SentOperation } from "../server/src/journal/index.ts";
import { LevelStore } from "../server/src/storage/level-store.ts";
import { formatFigures } from "./lib/figures.ts";
import { fixed } from "./lib/table.ts";
import { admitTool, connectH2, createEchoSession, ECHO, ECHO_INPUT, echoCaller, sessionClient, spawnService, withChildren } from "./lib/services.ts";
import type { Suite, SuiteReport } from "./lib/suite.ts";
import { measure } from "./lib/timing.ts";
import { childSide, measureVariants, thisProcessThreads, type Plan, type Variant } from "./lib/variants.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const PLAN: Plan = { rounds: 8, inFlight: 64, budgetMs: 15_000 };
const SEQUENTIAL = { warmup: 200, perRound: 150 };
const CONCURRENT = 4000;
/**
 * The default pool has 2 workers x 4 tool slots: 2 x 32 slots let 64 calls be in flight, here and
 * in the baseline alike. The bench's one workspace gets the whole pool, as a single-tenant
 * deployment sets it: its default share, half the pool, would hold half the calls in its queue.
 */
const SERVICE_ENV = {
  SERVICE_ENV_TOOL_SLOTS: String(PLAN.inFlight / 2),
  SERVICE_ENV_WORKSPACE_TOOL_SLOTS: String(PLAN.inFlight),
  SERVICE_ENV_WORKSPACE_WORKERS: "2",
};
/** CallTools made for the journal-bytes figure, on a restarted service. */
const JOURNAL_CALLS = 2000;
const OVERHEAD_TARGET_MS = 0.3;

async function run(): Promise<SuiteReport> {
  const { buildComponents } = await import("../scripts/build-components.ts");
  await buildComponents({ dirs: [path.join(ROOT, "components", "echo-wat")], log: (line) => process.stderr.write(`  ${line}\n`) });
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-sessions-"));
  const dataDir = path.join(tmp, "service");
  const journal = await journalAlone(path.join(tmp, "journal-alone"));
  try {
    const measured = await withChildren(async (started) => {
      const service = await spawnService(dataDir, SERVICE_ENV);
      started(service.child);
      const toolId = await admitTool(service.url, "echo-wat");
      const client = sessionClient(connectH2(service.url));
      const sessionId = await createEchoSession(client, toolId);
      const callTool = echoCaller(client, sessionId);
      const server = childSide("service", service.child);
      // Through the service first: the bare RPC only invokes what the service has prepared.
      await callTool();
      const variants: Variant[] = [
        {
          name: "journal alone: send + settle (this process)",
          call: journal.call,
          sides: [thisProcessThreads("libuv threads")],
          ...SEQUENTIAL,
          concurrent: CONCURRENT,
        },
        {
          name: "bare RPC -> service's pool.invoke (baseline)",
          call: echoCaller(sessionClient(connectH2(service.bareUrl)), "", toolId),
          sides: [server],
          ...SEQUENTIAL,
          concurrent: CONCURRENT,
        },
        { name: "CallTool: session + journal + pool", call: callTool, sides: [server], ...SEQUENTIAL, concurrent: CONCURRENT },
      ];
      const startedAt = performance.now();
      const results = await measureVariants(variants, PLAN);
      process.stderr.write(`  calls: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
      return { results, sessionId };
    });
    process.stderr.write("  journal bytes: compacting, restarting the service...\n");
    const bytes = await journalBytes(dataDir, measured.sessionId);

    const rows = measured.results.map((result) => result.row);
    const [alone, bare, callTool] = [rows[0]!, rows[1]!, rows[2]!];
    const overheadMs = callTool.medianMs - bare.medianMs;
    const truncated = measured.results.filter((result) => result.truncated).map((result) => result.row.name);
    return {
      rows,
      notes: [
        "",
        formatFigures([
          {
            figure: "journal + session overhead, p50",
            ours: `${fixed(overheadMs, 3)} ms`,
            baseline: `bare RPC p50 ${fixed(bare.medianMs, 3)} ms`,
            target: `<= ${OVERHEAD_TARGET_MS} ms`,
            met: overheadMs <= OVERHEAD_TARGET_MS,
          },
          { figure: "CallTool p99", ours: `${fixed(callTool.p99Ms, 3)} ms`, baseline: `bare RPC p99 ${fixed(bare.p99Ms, 3)} ms`, target: "-" },
          {
            figure: `CallTool calls/s, ${PLAN.inFlight} in flight`,
            ours: fixed(callTool.callsPerSec, 0),
            baseline: `bare RPC ${fixed(bare.callsPerSec, 0)}`,
            target: "-",
          },
          {
            figure: "service CPU per call",
            ours: `${fixed(callTool.serverCpuUs, 0)} µs`,
            baseline: `bare RPC ${fixed(bare.serverCpuUs, 0)} µs`,
            target: "-",
          },
          { figure: "journal bytes per call, compacted", ours: `${fixed(bytes.compactedPerCall, 0)} B`, baseline: "-", target: "-" },
          { figure: "journal bytes per call, as written (log)", ours: `${fixed(bytes.livePerCall, 0)} B`, baseline: "-", target: "-" },
          { figure: "journal bytes per call, keys + values", ours: `${fixed(bytes.logicalPerCall, 0)} B`, baseline: "-", target: "-" },
        ]),
        "",
        `Rows: ${PLAN.rounds} interleaved rounds of ${SEQUENTIAL.perRound} sequential calls per variant (order rotated each round, ${SEQUENTIAL.warmup} warm-up calls first), ` +
          `then ${CONCURRENT} calls with ${PLAN.inFlight} in flight per variant. Echo input ${JSON.stringify(ECHO_INPUT)}, output checked on every call. ` +
          `The service runs with its default 2 workers and SERVICE_ENV_TOOL_SLOTS=${SERVICE_ENV.SERVICE_ENV_TOOL_SLOTS} (the default 4 would refuse calls beyond 8 in flight), and its one workspace the whole pool (SERVICE_ENV_WORKSPACE_TOOL_SLOTS=${SERVICE_ENV.SERVICE_ENV_WORKSPACE_TOOL_SLOTS}, SERVICE_ENV_WORKSPACE_WORKERS=2).`,
        `What each row includes: "CallTool" = client -> Connect binary h2 -> the service's HTTP layer and auth gate -> session lookup and checks -> journal operation.sent (synced) -> ` +
          `service binding -> pool.invoke (worker, fresh instance) -> journal operation.receipt (synced) -> response. "bare RPC" = the same client, wire and pool.invoke in the same ` +
          `process, answered by connect-node's stock adapter with no auth, session or journal. "journal alone" = the two synced batches only, no RPC, no pool ` +
          `(its server columns: this process's libuv threads, where LevelDB writes; client CPU = the main thread).`,
        `"server" columns of the RPC rows are the service process (both rows share it; CPU read around every chunk, a forced GC per read subtracted); client CPU = this process's main thread.`,
        `CallTool p50 ${fixed(callTool.medianMs, 3)} ms = bare RPC ${fixed(bare.medianMs, 3)} ms + ${fixed(overheadMs, 3)} ms; the journal's two synced writes alone take ${fixed(alone.medianMs, 3)} ms (p50) on this filesystem.`,
        `Journal bytes: ${JOURNAL_CALLS} CallTools with ${PLAN.inFlight} in flight on the same session after a restart of the service on the same data directory. ` +
          `Compacted = growth of the LevelDB table files between two full compactions (service stopped, compactRange over every key, before and after the calls) / calls; ` +
          `as written = growth of the LevelDB directory (write-ahead log, tables, manifest; not the info LOG) while the service ran / calls: both batches of each call, the open-operations entry put and deleted included; ` +
          `keys + values = the ${bytes.eventsPerCall} journal records each call left (key with its sublevel prefix + JSON value, uncompressed). ` +
          `Data directory on ${bytes.filesystem}.`,
        ...(truncated.length > 0 ? [`cut short by the ${PLAN.budgetMs / 1000} s phase budget (fewer calls than planned): ${truncated.join(", ")}`] : []),
      ],
    };
  } finally {
    await journal.close();
    await fs.rm(tmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}

/** The service's Journal on its own LevelStore in this process: the writes of one CallTool, nothing else. */
async function journalAlone(dir: string): Promise<{ call: () => Promise<void>; close(): Promise<void> }> {
  const db = new Level<string, string>(dir);
  await db.open();
  const journal = new Journal(new LevelStore(db));
  const sessionId = newId("ses");
  const input = JSON.stringify(ECHO_INPUT);
  return {
    async call() {
      const operation: SentOperation = {
        operationId: newId("op"),
        environment: "sandbox",
        kind: "execute",
        deadlineMs: Date.now() + 300_000,
        tool: ECHO,
        input,
      };
      await journal.send(sessionId, operation);
      await journal.settle(sessionId, operation, returned(input));
    },
    close: () => db.close(),
  };
}

interface JournalBytes {
  compactedPerCall: number;
  livePerCall: number;
  logicalPerCall: number;
  eventsPerCall: number;
  filesystem: string;
}

/**
 * The service is stopped; its LevelDB is compacted here (everything down to table files), the
 * service restarted on it for JOURNAL_CALLS CallTools on `sessionId`, stopped, and compacted again.
 */
async function journalBytes(dataDir: string, sessionId: string): Promise<JournalBytes> {
  const metadata = path.join(dataDir, "metadata");
  const before = await compacted(metadata, sessionId);
  const live = await withChildren(async (started) => {
    const service = await spawnService(dataDir, SERVICE_ENV);
    started(service.child);
    const call = echoCaller(sessionClient(connectH2(service.url)), sessionId);
    const start = await levelDbBytes(metadata, "data");
    const m = await measure(call, { warmup: 0, sequential: 0, concurrent: JOURNAL_CALLS, inFlight: PLAN.inFlight, phaseBudgetMs: 120_000 });
    if (m.concurrentCalls !== JOURNAL_CALLS) throw new Error(`journal bytes: ${m.concurrentCalls} of ${JOURNAL_CALLS} calls made`);
    return (await levelDbBytes(metadata, "data")) - start;
  });
  const after = await compacted(metadata, sessionId, before.lastKey);
  return {
    compactedPerCall: (after.tableBytes - before.tableBytes) / JOURNAL_CALLS,
    livePerCall: live / JOURNAL_CALLS,
    logicalPerCall: after.recordBytes / JOURNAL_CALLS,
    eventsPerCall: after.records / JOURNAL_CALLS,
    filesystem: await filesystemOf(dataDir),
  };
}

/** In Node `level` is classic-level, which compacts on request; the universal type leaves that out. */
type Compactable = { compactRange(start: string, end: string): Promise<void> };

/**
 * Compacts the whole LevelDB (the memtable and every level into the last one) and reports the
 * table files' size, the session's last journal key, and the records after `afterKey`.
 */
async function compacted(
  dir: string,
  sessionId: string,
  afterKey?: string,
): Promise<{ tableBytes: number; lastKey: string; records: number; recordBytes: number }> {
  const db = new Level<string, string>(dir);
  await db.open();
  try {
    await (db as unknown as Compactable).compactRange("", "\uffff");
    const journal = db.sublevel<string, string>("journal", { valueEncoding: "utf8" });
    const prefixBytes = Buffer.byteLength(journal.prefix);
    const range = { gt: afterKey ?? `${sessionId}/`, lt: `${sessionId}/\uffff` };
    let records = 0;
    let recordBytes = 0;
    let lastKey = range.gt;
    for await (const [key, value] of journal.iterator(range)) {
      records++;
      recordBytes += prefixBytes + Buffer.byteLength(key) + Buffer.byteLength(value);
      lastKey = key;
    }
    return { tableBytes: await levelDbBytes(dir, "tables"), lastKey, records, recordBytes };
  } finally {
    await db.close();
  }
}

/** Bytes of LevelDB's table files, or of every file that holds data (tables, logs, manifest; not the info LOG). */
async function levelDbBytes(dir: string, which: "tables" | "data"): Promise<number> {
  const pattern = which === "tables" ? /\.(ldb|sst)$/ : /\.(ldb|sst|log)$|^MANIFEST-/;
  let total = 0;
  for (const name of await fs.readdir(dir)) if (pattern.test(name)) total += (await fs.stat(path.join(dir, name))).size;
  return total;
}

/** "ext4 (/dev/vda, mounted at /)": the mount holding `dir`, from /proc/mounts where there is one. */
async function filesystemOf(dir: string): Promise<string> {
  try {
    const real = await fs.realpath(dir);
    const holds = (mountPoint: string) => real === mountPoint || real.startsWith(mountPoint.endsWith("/") ? mountPoint : `${mountPoint}/`);
    const mounts = (await fs.readFile("/proc/mounts", "utf8"))
      .split("\n")
      .map((line) => line.split(" "))
      .filter((fields) => fields.length > 2 && holds(fields[1]!));
    const [device, mountPoint, type] = mounts.sort((a, b) => b[1]!.length - a[1]!.length)[0]!;
    return `${type} (${device}, mounted at ${mountPoint})`;
  } catch {
    return "an unknown filesystem";
  }
}

export const sessionsSuite: Suite = {
  name: "sessions",
  title: `CallTool of echo-wat through session + journal vs the bare pool RPC: sequential round trips, calls/s with ${PLAN.inFlight} in flight, journal bytes per call`,
  run,
};
