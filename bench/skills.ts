// Skill upload cost by size: first upload, identical re-upload (dedup hit) and the cached repeat,
// beside a raw HTTP/1.1 PUT of the same bytes to a bare node:http server and a raw signed PUT to
// the service's object store, all in one run (same machine state, same process layout).
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import * as v8 from "node:v8";
import * as vm from "node:vm";
import * as zlib from "node:zlib";
import type { Transport } from "@connectrpc/connect";
import { canonicalZip, crc32, sha256Hex } from "@skillenv/client/bundle";
import { createNodeTransport, createServiceClient, Skill, type FetchFunction, type ServiceClient, type UploadedSkill } from "@skillenv/client/node";
import { readBundle } from "../server/src/skills/bundle/index.ts";
import { BENCH_API_KEY, withServiceBesideBaseline, type ServerChild } from "./lib/child.ts";
import { MiB, percentile, summarize } from "./lib/stats.ts";
import type { ResultRow, Suite, SuiteReport } from "./lib/suite.ts";
import { fixed, formatTable, type Column } from "./lib/table.ts";
import { msSince, now } from "./lib/timing.ts";

const KiB = 1024;

interface Size {
  label: string;
  /** Part of the skill names ([a-z0-9_-]). */
  slug: string;
  /** Random (incompressible) files next to SKILL.md; the default entry limit is 10 MiB, so 20 MiB is split. */
  files: number;
  fileBytes: number;
  reps: number;
  /** Untimed full cycles first (JIT, connections, LevelDB and page cache). */
  warmup: number;
}

const SIZES: Size[] = [
  { label: "10 KiB", slug: "10kib", files: 1, fileBytes: 10 * KiB, reps: 20, warmup: 10 },
  { label: "1 MiB", slug: "1mib", files: 1, fileBytes: 1 * MiB, reps: 10, warmup: 3 },
  { label: "20 MiB", slug: "20mib", files: 4, fileBytes: 5 * MiB, reps: 5, warmup: 1 },
];

/** Upper bound per phase (one row), so a slow path cannot stall the whole run; fewer reps are reported. */
const PHASE_BUDGET_MS = 20_000;
/** In-process component timings: repetitions per size (median reported). */
const COMPONENT_REPS = { small: 20, large: 5 };

/** Counts round trips and times each one, by RPC name or "PUT", for the operation being measured. */
class Meter {
  rpcs = 0;
  puts = 0;
  #steps: Map<string, number> | undefined;

  /** Records step times into `steps` until the returned function is called. */
  capture(steps: Map<string, number>): () => void {
    this.#steps = steps;
    return () => (this.#steps = undefined);
  }

  add(step: string, ms: number): void {
    if (this.#steps) this.#steps.set(step, (this.#steps.get(step) ?? 0) + ms);
  }
}

/** A Transport that counts and times every RPC (the equivalent of an interceptor, around createNodeTransport). */
function countingTransport(inner: Transport, meter: Meter): Transport {
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      meter.rpcs++;
      const start = now();
      try {
        return await inner.unary(method, signal, timeoutMs, header, input, contextValues);
      } finally {
        meter.add(method.name, msSince(start));
      }
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      meter.rpcs++;
      return inner.stream(method, signal, timeoutMs, header, input, contextValues);
    },
  };
}

/** The fetch the client uses for the signed PUT (and the baselines use for theirs): global fetch, HTTP/1.1. */
function countingFetch(meter: Meter): FetchFunction {
  return async (input, init) => {
    meter.puts++;
    const start = now();
    try {
      return await globalThis.fetch(input, init);
    } finally {
      meter.add("PUT", msSince(start));
    }
  };
}

interface Op {
  /** The timed part: the upload call with the bundle already built, or the raw PUT. */
  ms: number;
  /** Skill.bundle() (read + validate + zip + hash), timed before the upload; NaN where not built. */
  bundleMs: number;
  clientCpuUs: number;
  rpcs: number;
  puts: number;
  bytesSent: number;
  /** Wall time per round trip inside `ms`, by step. */
  steps: Map<string, number>;
}

interface Phase {
  name: string;
  ops: Op[];
  /** Bytes of the canonical zip (for MiB/s); 0 where nothing is transferred. */
  payloadBytes: number;
  serverCpuUs: number;
  serverRssBytes: number;
}

const KEYS = ["a", "b", "c", "d", "e"] as const;
type PhaseKey = (typeof KEYS)[number];
const PHASE_NAMES: Record<PhaseKey, string> = {
  a: "(a) first upload",
  b: "(b) re-upload, new instance (dedup)",
  c: "(c) same instance again (cached)",
  d: "(d) raw PUT, bare node:http",
  e: "(e) raw signed PUT, service store",
};
/** Round trips each path must make; anything else means the bench measured the wrong path. */
const EXPECTED: Partial<Record<PhaseKey, { rpcs: number; puts: number }>> = {
  a: { rpcs: 3, puts: 1 }, // Presign, PUT, Finalize, PutSkill
  b: { rpcs: 2, puts: 0 }, // Presign (exists), PutSkill (no-op)
  c: { rpcs: 0, puts: 0 },
  d: { rpcs: 0, puts: 1 },
  e: { rpcs: 0, puts: 1 },
};

interface Context {
  client: ServiceClient;
  meter: Meter;
  fetch: FetchFunction;
  service: ServerChild;
  bare: ServerChild;
  gc: () => void;
}

function skillFiles(size: Size): Record<string, Uint8Array | string> {
  const files: Record<string, Uint8Array | string> = {
    "SKILL.md": `---\nname: bench-skill\ndescription: Benchmark skill with ${size.label} of random bytes.\n---\n\n# Bench\n\nNothing to see.\n`,
  };
  for (let i = 0; i < size.files; i++) files[`data/part-${i}.bin`] = randomBytes(size.fileBytes);
  return files;
}

async function measureOp(ctx: Context, body: () => Promise<number>): Promise<Op> {
  const steps = new Map<string, number>();
  const release = ctx.meter.capture(steps);
  const rpcs = ctx.meter.rpcs;
  const puts = ctx.meter.puts;
  const cpu = process.cpuUsage();
  const start = now();
  try {
    const bytesSent = await body();
    const ms = msSince(start);
    const used = process.cpuUsage(cpu);
    return { ms, bundleMs: Number.NaN, clientCpuUs: used.user + used.system, rpcs: ctx.meter.rpcs - rpcs, puts: ctx.meter.puts - puts, bytesSent, steps };
  } finally {
    release();
  }
}

/**
 * Runs `one` up to `count` times within the budget, with server stats around the whole phase. A
 * stats probe costs the child CPU itself (IPC and a full GC, after its CPU reading, so it lands in
 * the next interval); two back-to-back probes first measure that cost, which is then subtracted.
 */
async function runPhase(
  ctx: Context,
  key: PhaseKey,
  server: ServerChild,
  count: number,
  payloadBytes: number,
  one: (i: number) => Promise<Op>,
): Promise<Phase> {
  const probe = await server.stats();
  const before = await server.stats();
  const probeCpuUs = before.cpuMicros - probe.cpuMicros;
  const deadline = performance.now() + PHASE_BUDGET_MS;
  const ops: Op[] = [];
  for (let i = 0; i < count && performance.now() < deadline; i++) {
    ctx.gc(); // untimed: every operation starts from a collected client heap
    const op = await one(i);
    const expected = EXPECTED[key];
    if (expected && (op.rpcs !== expected.rpcs || op.puts !== expected.puts)) {
      throw new Error(`${PHASE_NAMES[key]}: ${op.rpcs} RPCs + ${op.puts} PUTs, expected ${expected.rpcs} + ${expected.puts}`);
    }
    ops.push(op);
  }
  const after = await server.stats();
  return {
    name: PHASE_NAMES[key],
    ops,
    payloadBytes,
    serverCpuUs: ops.length > 0 ? Math.max(0, after.cpuMicros - before.cpuMicros - probeCpuUs) / ops.length : Number.NaN,
    serverRssBytes: after.rssBytes,
  };
}

async function checkedPut(ctx: Context, url: string, headers: Record<string, string>, zip: Uint8Array): Promise<number> {
  const response = await ctx.fetch(url, { method: "PUT", headers, body: zip as Uint8Array<ArrayBuffer> });
  const text = await response.text();
  if (!response.ok) throw new Error(`PUT ${url}: HTTP ${response.status} ${text}`);
  return zip.byteLength;
}

/** One full cycle of the five paths over `count` fresh contents. */
async function runSize(ctx: Context, size: Size, count: number, prefix: string): Promise<Record<PhaseKey, Phase>> {
  const contents = Array.from({ length: count }, () => skillFiles(size));
  const name = (i: number) => `${prefix}-${size.slug}-${i}`;
  const firsts: { skill: Skill; zip: Uint8Array; result: UploadedSkill }[] = [];
  const again: { skill: Skill; result: UploadedSkill }[] = [];
  let zipBytes = 0;

  const uploadWithBundle = async (
    skill: Skill,
    check: (bundle: { zip: Uint8Array; contentHash: string }, result: UploadedSkill) => void,
    keep: (zip: Uint8Array, result: UploadedSkill) => void,
  ) => {
    const started = now();
    const bundle = await skill.bundle();
    const bundleMs = msSince(started);
    let result: UploadedSkill | undefined;
    const op = await measureOp(ctx, async () => {
      result = await ctx.client.skills.upload(skill);
      return result.bytesSent;
    });
    check(bundle, result!);
    keep(bundle.zip, result!);
    zipBytes = bundle.zip.byteLength;
    return { ...op, bundleMs };
  };

  const a = await runPhase(ctx, "a", ctx.service, count, 0, (i) => {
    const skill = Skill.fromFiles({ name: name(i), files: contents[i]! });
    return uploadWithBundle(
      skill,
      (bundle, result) => {
        if (!result.changed || result.bytesSent !== bundle.zip.byteLength || result.contentHash !== bundle.contentHash) {
          throw new Error(`(a) ${name(i)}: expected a full upload, got changed=${result.changed} bytesSent=${result.bytesSent}`);
        }
      },
      (zip, result) => firsts.push({ skill, zip, result }),
    );
  });
  a.payloadBytes = zipBytes;

  const b = await runPhase(ctx, "b", ctx.service, firsts.length, 0, (i) => {
    const skill = Skill.fromFiles({ name: name(i), files: contents[i]! });
    return uploadWithBundle(
      skill,
      (bundle, result) => {
        if (result.changed || result.bytesSent !== 0 || bundle.contentHash !== firsts[i]!.result.contentHash) {
          throw new Error(`(b) ${name(i)}: expected a dedup hit and a no-op PutSkill, got changed=${result.changed} bytesSent=${result.bytesSent}`);
        }
      },
      (_zip, result) => again.push({ skill, result }),
    );
  });

  const c = await runPhase(ctx, "c", ctx.service, again.length, 0, async (i) => {
    const { skill, result } = again[i]!;
    return measureOp(ctx, async () => {
      const cached = await ctx.client.skills.upload(skill);
      if (cached !== result) throw new Error(`(c) ${name(i)}: expected the cached result of the instance`);
      return cached.bytesSent;
    });
  });

  const d = await runPhase(ctx, "d", ctx.bare, firsts.length, zipBytes, (i) =>
    measureOp(ctx, () => checkedPut(ctx, ctx.bare.url, { "content-type": "application/octet-stream" }, firsts[i]!.zip)),
  );

  // (e) fresh content again (the (a) bytes are finalized, so Presign would answer "exists"); the
  // bundle and the Presign happen before the phase, untimed and outside the server CPU window.
  const signed: { url: string; headers: Record<string, string>; zip: Uint8Array }[] = [];
  for (let i = 0; i < count; i++) {
    const bundle = await Skill.fromFiles({ files: skillFiles(size) }).bundle();
    const presigned = await ctx.client.assets.presign({ sha256: bundle.contentHash, sizeBytes: BigInt(bundle.zip.byteLength) });
    if (presigned.exists || presigned.uploadUrl === undefined) throw new Error("(e) presign: expected an upload URL");
    signed.push({ url: presigned.uploadUrl, headers: presigned.uploadHeaders, zip: bundle.zip });
  }
  const e = await runPhase(ctx, "e", ctx.service, signed.length, zipBytes, (i) =>
    measureOp(ctx, () => checkedPut(ctx, signed[i]!.url, signed[i]!.headers, signed[i]!.zip)),
  );

  return { a, b, c, d, e };
}

/** In-process costs of the pieces (this process, not the server child): where the 20 MiB go. */
async function components(size: Size): Promise<Map<string, number>> {
  const files = new Map(Object.entries(skillFiles(size)).map(([p, data]) => [p, typeof data === "string" ? new TextEncoder().encode(data) : data]));
  const zip = canonicalZip(files);
  const reps = size.fileBytes * size.files > MiB ? COMPONENT_REPS.large : COMPONENT_REPS.small;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-fsync-"));
  const blobFile = path.join(dir, "read");
  await fs.writeFile(blobFile, zip);
  const timings: [string, () => unknown][] = [
    ["Skill.bundle() total", () => Skill.fromFiles({ name: "x", files }).bundle()],
    ["canonicalZip (incl. crc32)", () => canonicalZip(files)],
    [
      "crc32 of the files (JS loop)",
      () => {
        for (const data of files.values()) crc32(data);
      },
    ],
    [
      "  for scale: native zlib.crc32",
      () => {
        for (const data of files.values()) zlib.crc32(data);
      },
    ],
    ["sha256 WebCrypto (client)", () => sha256Hex(zip)],
    ["sha256 node:crypto (server PUT)", () => createHash("sha256").update(zip).digest("hex")],
    [
      "file write + fsync (server PUT)",
      async () => {
        const file = path.join(dir, "blob");
        const handle = await fs.open(file, "w", 0o600);
        await handle.write(zip);
        await handle.sync();
        await handle.close();
        await fs.rm(file);
      },
    ],
    ["blob read, page cache (PutSkill)", () => fs.readFile(blobFile)],
    ["readBundle (PutSkill validation)", () => readBundle(zip)],
  ];
  const result = new Map<string, number>();
  try {
    for (const [label, fn] of timings) {
      await fn(); // warm-up
      const samples: number[] = [];
      for (let i = 0; i < reps; i++) {
        const start = now();
        await fn();
        samples.push(msSince(start));
      }
      result.set(label, summarize(samples).medianMs);
    }
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
  return result;
}

const median = (values: readonly number[]) =>
  percentile(
    [...values].sort((x, y) => x - y),
    50,
  );

interface DetailRow {
  name: string;
  phase: Phase;
}

function perOp(phase: Phase, pick: (op: Op) => number): number {
  return phase.ops.length > 0 ? phase.ops.reduce((sum, op) => sum + pick(op), 0) / phase.ops.length : Number.NaN;
}

function roundTrips(phase: Phase): string {
  const rpcs = perOp(phase, (op) => op.rpcs);
  const puts = perOp(phase, (op) => op.puts);
  const digits = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(2));
  return `${digits(rpcs + puts)} (${digits(rpcs)} rpc + ${digits(puts)} PUT)`;
}

const DETAIL_COLUMNS: Column<DetailRow>[] = [
  { header: "name", value: (r) => r.name, align: "left" },
  { header: "n", value: (r) => String(r.phase.ops.length) },
  { header: "median ms", value: (r) => fixed(summarize(r.phase.ops.map((op) => op.ms)).medianMs, 3) },
  { header: "p99 ms", value: (r) => fixed(summarize(r.phase.ops.map((op) => op.ms)).p99Ms, 3) },
  {
    header: "MiB/s",
    value: (r) => {
      const bytes = r.phase.payloadBytes || perOp(r.phase, (op) => op.bytesSent);
      return bytes > 0 ? fixed(bytes / MiB / (median(r.phase.ops.map((op) => op.ms)) / 1000), 1) : "-";
    },
  },
  { header: "round trips/op", value: (r) => roundTrips(r.phase), align: "left" },
  { header: "bytes sent/op", value: (r) => Math.round(perOp(r.phase, (op) => op.bytesSent)).toLocaleString("en-US") },
  { header: "bundle ms", value: (r) => fixed(median(r.phase.ops.map((op) => op.bundleMs)), 3) },
  { header: "bundle+upload ms", value: (r) => fixed(median(r.phase.ops.map((op) => op.bundleMs + op.ms)), 3) },
  { header: "server CPU ms/op", value: (r) => fixed(r.phase.serverCpuUs / 1000, 2) },
];

const STEP_NAMES = ["Presign", "PUT", "Finalize", "PutSkill"];
const STEP_COLUMNS: Column<DetailRow>[] = [
  { header: "name", value: (r) => r.name, align: "left" },
  ...STEP_NAMES.map((step) => ({
    header: `${step} ms`,
    value: (r: DetailRow) => (r.phase.ops.some((op) => op.steps.has(step)) ? fixed(median(r.phase.ops.map((op) => op.steps.get(step) ?? 0)), 3) : "-"),
  })),
  {
    header: "client rest ms",
    value: (r) => fixed(median(r.phase.ops.map((op) => op.ms - [...op.steps.values()].reduce((sum, x) => sum + x, 0))), 3),
  },
];

async function run(): Promise<SuiteReport> {
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  // Default limits fit: 20 MiB bundle < 128 MiB upload and 50 MiB skill total; 5 MiB entries < 10 MiB.
  const bareScript = path.join(import.meta.dirname, "servers/bare-http1.ts");
  return withServiceBesideBaseline(bareScript, [], async ({ service, baseline: bare }) => {
    const meter = new Meter();
    const fetch = countingFetch(meter);
    // Connect binary over HTTP/1.1 (createNodeTransport's default), the same HTTP version as fetch's PUT.
    const transport = countingTransport(createNodeTransport({ baseUrl: service.url, apiKey: BENCH_API_KEY }), meter);
    const ctx: Context = { client: createServiceClient(transport, { fetch }), meter, fetch, service, bare, gc };

    const rows: ResultRow[] = [];
    const details: DetailRow[] = [];
    const steps: DetailRow[] = [];
    const comps: Map<string, number>[] = [];
    const short: string[] = [];
    for (const size of SIZES) {
      const startedAt = performance.now();
      await runSize(ctx, size, size.warmup, "warm");
      const phases = await runSize(ctx, size, size.reps, "bench");
      for (const key of KEYS) {
        const phase = phases[key];
        const name = `${size.label} ${phase.name}`;
        const s = summarize(phase.ops.map((op) => op.ms));
        if (s.n < size.reps) short.push(name);
        rows.push({
          name,
          n: s.n,
          medianMs: s.medianMs,
          p99Ms: s.p99Ms,
          callsPerSec: Number.NaN,
          serverRssMiB: phase.serverRssBytes / MiB,
          serverCpuUs: phase.serverCpuUs,
          clientCpuUs: perOp(phase, (op) => op.clientCpuUs),
        });
        details.push({ name, phase });
        if (key === "a" || key === "b") steps.push({ name, phase });
      }
      comps.push(await components(size));
      process.stderr.write(`  ${size.label}: ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
    }

    const componentNames = [...comps[0]!.keys()];
    const componentTable = formatTable<string>(
      [
        { header: "component (in-process, median ms)", value: (label) => label, align: "left" },
        ...SIZES.map((size, i) => ({ header: size.label, value: (label: string) => fixed(comps[i]!.get(label)!, 3) })),
      ],
      componentNames,
    );
    return {
      rows,
      notes: [
        "",
        "Per operation. Time = the upload call with the bundle already built (Skill.bundle() is memoized and timed first, as 'bundle ms'), or the raw PUT.",
        "MiB/s = canonical zip bytes / median time. Round trips counted client-side (transport wrapper for RPCs, fetch wrapper for PUTs). p99 is nearest-rank: with n <= 20 it is the maximum.",
        formatTable(DETAIL_COLUMNS, details),
        "",
        "Round trips inside the timed upload (median ms of each; 'client rest' = time minus the round trips: uploadAsset's second SHA-256 of the zip, protobuf, glue):",
        formatTable(STEP_COLUMNS, steps),
        "",
        componentTable,
        "",
        "service: connect binary over HTTP/1.1 (connect-node), signed PUT and raw PUTs via global fetch (undici, HTTP/1.1), all on 127.0.0.1; data dir under os.tmpdir(); server CPU per op is the child's user+sys CPU over the phase (all threads) / n, minus the measured cost of a stats probe.",
        ...(short.length > 0 ? [`cut short by the ${PHASE_BUDGET_MS / 1000} s phase budget: ${short.join(", ")}`] : []),
      ],
    };
  });
}

export const skillsSuite: Suite = {
  name: "skills",
  title: `Skill upload (${SIZES.map((s) => `${s.label} x${s.reps}`).join(", ")}): first upload, identical re-upload, cached repeat, beside raw PUTs of the same bytes`,
  run,
};
