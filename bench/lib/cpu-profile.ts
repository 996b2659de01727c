// Summarises a V8 CPU profile (node --cpu-prof; BENCH_CPU_PROF=<dir> makes the sessions and runs
// suites profile their service child) as plain text: where the busy time went by function
// (self), by package or file (self), and which of the project's own functions it ran under
// (inclusive), so that a hot spot can be named by file and function without opening DevTools.
//
//   node bench/lib/cpu-profile.ts <file.cpuprofile> [--top 25] [--under server/src/] [--callers <function> [--depth 4]]
//
// --callers lists, for the samples spent in functions of that name (self time), the call paths
// that led there (the nearest frames first), to find who makes, say, every DOMException.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { formatTable } from "./table.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  /** Microseconds since the previous sample. */
  timeDeltas: number[];
}

/** V8's pseudo-frames: not code of anyone's. */
const IDLE = "(idle)";
const PSEUDO = new Set([IDLE, "(program)", "(garbage collector)", "(root)"]);
const ROOT = path.resolve(import.meta.dirname, "../..");

export interface ProfileSummary {
  /** Sampled time that was not idle, ms. */
  busyMs: number;
  idleMs: number;
  /** Self time by function and by place, ms, largest first. */
  functions: Array<{ name: string; where: string; ms: number }>;
  places: Array<{ where: string; ms: number }>;
  /** Inclusive time of functions whose file lies under `under`, ms, largest first. */
  inclusive: Array<{ name: string; where: string; ms: number }>;
  /** With `callers`: self time of that function by the path that called it, ms, largest first. */
  callers: Array<{ path: string; ms: number }>;
}

export function summarizeProfile(profile: Profile, under = "server/src/", callersOf?: string, callerDepth = 4): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const self = new Map<string, number>();
  const places = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const callers = new Map<string, number>();
  let busyMs = 0;
  let idleMs = 0;
  // Sample i lasts until sample i + 1 (DevTools' reading of timeDeltas).
  for (let i = 0; i < profile.samples.length - 1; i++) {
    const ms = profile.timeDeltas[i + 1]! / 1000;
    const node = byId.get(profile.samples[i]!)!;
    if (node.callFrame.functionName === IDLE) {
      idleMs += ms;
      continue;
    }
    busyMs += ms;
    add(self, functionKey(node), ms);
    add(places, placeOf(node.callFrame.url, node.callFrame.functionName), ms);
    if (node.callFrame.functionName === callersOf) add(callers, callerPath(node, byId, parent, callerDepth), ms);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!;
      if (!relative(frame.callFrame.url).startsWith(under)) continue;
      const key = functionKey(frame);
      if (!seen.has(key)) {
        seen.add(key);
        add(inclusive, key, ms);
      }
    }
  }
  const split = ([key, ms]: [string, number]) => {
    const [name, where] = key.split("\u0000") as [string, string];
    return { name, where, ms };
  };
  return {
    busyMs,
    idleMs,
    functions: [...self].sort((a, b) => b[1] - a[1]).map(split),
    places: [...places].sort((a, b) => b[1] - a[1]).map(([where, ms]) => ({ where, ms })),
    inclusive: [...inclusive].sort((a, b) => b[1] - a[1]).map(split),
    callers: [...callers].sort((a, b) => b[1] - a[1]).map(([path, ms]) => ({ path, ms })),
  };
}

/** "caller (file:line) < its caller (file:line) < ...", nearest first. */
function callerPath(node: ProfileNode, byId: Map<number, ProfileNode>, parent: Map<number, number>, depth: number): string {
  const frames: string[] = [];
  for (let id = parent.get(node.id); id !== undefined && frames.length < depth; id = parent.get(id)) {
    const [name, where] = functionKey(byId.get(id)!).split("\u0000") as [string, string];
    if (!PSEUDO.has(name)) frames.push(where === "" ? name : `${name} (${where})`);
  }
  return frames.join(" < ");
}

function add(into: Map<string, number>, key: string, ms: number): void {
  into.set(key, (into.get(key) ?? 0) + ms);
}

function functionKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url === "" ? "" : `${relative(url)}:${lineNumber + 1}`;
  return `${functionName || "(anonymous)"}\u0000${where}`;
}

/** A package for dependencies, the file for the project's own code and Node's internals. */
function placeOf(url: string, functionName: string): string {
  if (url === "") return PSEUDO.has(functionName) ? functionName : "(native)";
  const file = relative(url);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
  return pkg ? `npm:${pkg[1]}` : file;
}

function relative(url: string): string {
  const file = url.startsWith("file://") ? new URL(url).pathname : url;
  return file.startsWith(`${ROOT}/`) ? file.slice(ROOT.length + 1) : file;
}

function render(summary: ProfileSummary, top: number, under: string): string {
  const share = (ms: number) => `${((100 * ms) / summary.busyMs).toFixed(1)}%`;
  const rows = <T extends { ms: number }>(items: T[]) => items.slice(0, top).map((item) => ({ ...item, share: share(item.ms) }));
  return [
    `busy ${(summary.busyMs / 1000).toFixed(2)} s, idle ${(summary.idleMs / 1000).toFixed(2)} s; shares are of busy time`,
    "",
    formatTable(
      [
        { header: "self", value: (r) => r.share },
        { header: "ms", value: (r) => r.ms.toFixed(0) },
        { header: "function", value: (r) => r.name, align: "left" },
        { header: "where", value: (r) => r.where, align: "left" },
      ],
      rows(summary.functions),
    ),
    "",
    formatTable(
      [
        { header: "self", value: (r) => r.share },
        { header: "ms", value: (r) => r.ms.toFixed(0) },
        { header: "package or file", value: (r) => r.where, align: "left" },
      ],
      rows(summary.places),
    ),
    "",
    formatTable(
      [
        { header: "inclusive", value: (r) => r.share },
        { header: "ms", value: (r) => r.ms.toFixed(0) },
        { header: `function under ${under}`, value: (r) => r.name, align: "left" },
        { header: "where", value: (r) => r.where, align: "left" },
      ],
      rows(summary.inclusive),
    ),
    ...(summary.callers.length > 0
      ? [
          "",
          formatTable(
            [
              { header: "self", value: (r) => r.share },
              { header: "ms", value: (r) => r.ms.toFixed(0) },
              { header: "called from (nearest first)", value: (r) => r.path, align: "left" },
            ],
            rows(summary.callers),
          ),
        ]
      : []),
  ].join("\n");
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      top: { type: "string", default: "25" },
      under: { type: "string", default: "server/src/" },
      callers: { type: "string" },
      depth: { type: "string", default: "4" },
    },
  });
  if (positionals.length === 0)
    throw new Error("usage: node bench/lib/cpu-profile.ts <file.cpuprofile> [--top 25] [--under server/src/] [--callers <function> [--depth 4]]");
  for (const file of positionals) {
    const summary = summarizeProfile(JSON.parse(readFileSync(file, "utf8")) as Profile, values.under, values.callers, Number(values.depth));
    console.log(`# ${file}\n\n${render(summary, Number(values.top), values.under)}\n`);
  }
}
