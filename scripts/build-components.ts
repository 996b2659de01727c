// Builds the WebAssembly components under components/ (or the ones given on the
// command line) into build/components/<name>.wasm.
//
//   node scripts/build-components.ts              every directory of components/
//   node scripts/build-components.ts echo-wat     the components of these names under components/
//   node scripts/build-components.ts path/to/dir  a component directory anywhere (a user's own)
//
// A component directory holds component.wat (a hand-written core module) or
// component.js (componentize-js), an optional component.json
// {"world": "tool" | "agent-loop" | <a world of world.wit>, "features": [...],
//  "engine": "starlingmonkey" | "quickjs"}
// and, for JS components that import WASI beyond wit/env.wit, a world.wit that
// includes skillenv:env/<world>@0.1.0 and imports wasi:*@0.2.12 interfaces.
// `features` are the componentize-js engine features to keep (default none);
// every other one is disabled, so a component imports only what it uses.
// `engine` "quickjs" builds with componentize-qjs instead of StarlingMonkey: a
// ~1.6 MB component whose fresh instance costs a fraction of StarlingMonkey's
// (synchronous exports only, no world.wit; features none, which imports nothing,
// or any of stdio/random/clocks, which bring all of its WASI imports; docs/components.md).
//
// A component is skipped when a content hash of its sources, the env contract,
// this builder and the toolchain versions matches the stamp of its last build.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const BUILDER = fileURLToPath(import.meta.url);
const ROOT = resolve(BUILDER, "../..");
const SOURCES = join(ROOT, "components");
const SHARED = join(SOURCES, "shared");
const ENV_WIT = join(ROOT, "wit", "env.wit");
/** The WASI release whose WIT jco ships; StarlingMonkey's own 0.2.10 imports merge into it. */
const WASI_VERSION = "0.2.12";
const ENV_WORLDS = ["tool", "agent-loop"];
const ENGINE_FEATURES = ["stdio", "random", "clocks", "http", "fetch-event"] as const;
type Feature = (typeof ENGINE_FEATURES)[number];
const ENGINES = ["starlingmonkey", "quickjs"] as const;
type Engine = (typeof ENGINES)[number];
/** QuickJS has no feature switches: any of these brings its whole WASI world (no network). */
const QUICKJS_FEATURES: readonly Feature[] = ["stdio", "random", "clocks"];

interface Spec {
  name: string;
  dir: string;
  kind: "wat" | "js";
  world: string;
  /** Engine features kept (JS only). */
  features: Feature[];
  /** The JavaScript engine (JS only). */
  engine: Engine;
  /** Set when the directory brings its own world.wit. */
  worldWit: boolean;
}

/** A component whose stamp is stale: built into `tmp`, then renamed to `out`. */
interface Job {
  spec: Spec;
  out: string;
  tmp: string;
  hash: string;
}

/** What a componentize child reports per job over its IPC channel. */
type JobReport = { index: number; ms: number } | { index: number; error: string };

export interface BuiltComponent {
  name: string;
  path: string;
  bytes: number;
  ms: number;
  /** False when the stamp matched and the previous build was kept. */
  rebuilt: boolean;
}

export interface BuildOptions {
  /** Component directories; defaults to every directory of components/. */
  dirs?: string[];
  outDir?: string;
  /** Child processes running componentize-js, each building its share one by one. */
  concurrency?: number;
  log?: (line: string) => void;
}

export async function buildComponents(options: BuildOptions = {}): Promise<BuiltComponent[]> {
  const outDir = options.outDir ?? join(ROOT, "build", "components");
  await mkdir(outDir, { recursive: true });
  return withLock(join(outDir, ".lock"), () => build(outDir, options));
}

/**
 * Runs `fn` while holding a lock file, so that concurrent builders (test files
 * running in parallel, each building in beforeAll) build once: the others wait,
 * then find the stamps current. A lock left by a dead process is taken over.
 */
async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      await writeFile(path, String(process.pid), { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = Number(await readFile(path, "utf8").catch(() => ""));
      if (owner > 0 && !isAlive(owner)) await rm(path, { force: true });
      else await new Promise((retry) => setTimeout(retry, 200));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(path, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function build(outDir: string, options: BuildOptions): Promise<BuiltComponent[]> {
  const log = options.log ?? ((line: string) => console.log(line));
  const dirs = options.dirs?.map((dir) => resolve(dir)) ?? (await componentDirs());
  const toolchain = await toolchainFingerprint();
  const specs = await Promise.all(dirs.map(readSpec));
  const built: BuiltComponent[] = [];
  const failures: string[] = [];
  const record = (component: BuiltComponent) => {
    built.push(component);
    log(summary(component));
  };
  const finish = async (job: Job, outcome: { ms: number } | { error: string }) => {
    if ("error" in outcome) failures.push(`${job.spec.name}: ${outcome.error}`);
    else record(await install(job, outcome.ms));
  };

  const stale: Job[] = [];
  for (const checked of await Promise.all(specs.map((spec) => checkStamp(spec, outDir, toolchain)))) {
    if ("hash" in checked) stale.push(checked);
    else record(checked);
  }
  // WAT builds take milliseconds in-process. componentize-js blocks its process
  // for seconds (synchronous splicing, then wizer via spawnSync), so it runs in
  // child processes, which also keeps its preopen hack out of this one. Its
  // first build in a process costs about twice the later ones (engine warm-up),
  // and one build keeps about two cores busy (V8's background tier-up, wizer's
  // compiler threads): on 2 cores one child building 4 components took 13-14 s,
  // two children 13.5-15 s, one child per component 31-39 s.
  const js = stale.filter((job) => job.spec.kind === "js");
  const quickjs = js.filter((job) => job.spec.engine === "quickjs");
  const starlingmonkey = js.filter((job) => job.spec.engine === "starlingmonkey");
  const concurrency = options.concurrency ?? Math.max(1, Math.floor(availableParallelism() / 2));
  await Promise.all([
    ...stale.filter((job) => job.spec.kind === "wat").map(async (job) => finish(job, await buildWat(job))),
    // componentize-qjs is native code taking the source as text: about a second each, in-process.
    (async () => {
      for (const job of quickjs) await finish(job, await buildQuickJs(job));
    })(),
    ...shares(starlingmonkey, concurrency).map((share) => componentizeInChild(share, finish)),
  ]);
  if (failures.length > 0) throw new Error(`component build failed:\n  ${failures.join("\n  ")}`);
  return built;
}

async function componentDirs(): Promise<string[]> {
  const entries = await readdir(SOURCES, { withFileTypes: true });
  const dirs = entries.filter((entry) => entry.isDirectory()).map((entry) => join(SOURCES, entry.name));
  const withSource = await Promise.all(dirs.map(async (dir) => ((await sourceKind(dir)) ? dir : undefined)));
  return withSource.filter((dir): dir is string => dir !== undefined).sort();
}

async function sourceKind(dir: string): Promise<Spec["kind"] | undefined> {
  const files = new Set(await readdir(dir));
  if (files.has("component.wat") && files.has("component.js")) throw new Error(`${dir}: has both component.wat and component.js`);
  if (files.has("component.wat")) return "wat";
  if (files.has("component.js")) return "js";
  return undefined;
}

async function readSpec(dir: string): Promise<Spec> {
  const kind = await sourceKind(dir);
  if (!kind) throw new Error(`${dir}: no component.wat or component.js`);
  const files = await readdir(dir);
  const manifest = files.includes("component.json") ? parseManifest(dir, await readFile(join(dir, "component.json"), "utf8")) : {};
  const worldWit = files.includes("world.wit");
  const engine = manifest.engine ?? "starlingmonkey";
  const spec: Spec = { name: basename(dir), dir, kind, world: manifest.world ?? "tool", features: manifest.features ?? [], engine, worldWit };
  if (kind === "wat" && (worldWit || spec.features.length > 0 || manifest.engine)) {
    throw new Error(`${dir}: a WAT component targets a world of wit/env.wit and has no engine or engine features`);
  }
  if (engine === "quickjs" && (worldWit || spec.features.some((feature) => !QUICKJS_FEATURES.includes(feature)))) {
    throw new Error(`${dir}: a QuickJS component targets a world of wit/env.wit and keeps only features ${QUICKJS_FEATURES.join(", ")}`);
  }
  if (!worldWit && !ENV_WORLDS.includes(spec.world)) {
    throw new Error(`${dir}: world "${spec.world}" is not in wit/env.wit (${ENV_WORLDS.join(", ")}); add a world.wit`);
  }
  return spec;
}

function parseManifest(dir: string, text: string): { world?: string; features?: Feature[]; engine?: Engine } {
  const manifest: unknown = JSON.parse(text);
  if (typeof manifest !== "object" || manifest === null) throw new Error(`${dir}/component.json: not an object`);
  const { world, features, engine } = manifest as Record<string, unknown>;
  if (engine !== undefined && !(ENGINES as readonly unknown[]).includes(engine)) {
    throw new Error(`${dir}/component.json: "engine" must be one of ${ENGINES.join(", ")}`);
  }
  if (world !== undefined && typeof world !== "string") throw new Error(`${dir}/component.json: "world" must be a string`);
  if (features !== undefined && !(Array.isArray(features) && features.every(isFeature))) {
    throw new Error(`${dir}/component.json: "features" must list some of ${ENGINE_FEATURES.join(", ")}`);
  }
  return { world, features, engine: engine as Engine | undefined };
}

function isFeature(value: unknown): value is Feature {
  return (ENGINE_FEATURES as readonly unknown[]).includes(value);
}

/** Everything outside a component's directory that its build depends on. */
async function toolchainFingerprint(): Promise<string> {
  const hash = createHash("sha256");
  hash.update(await readFile(BUILDER));
  hash.update(await readFile(ENV_WIT));
  // Modules under components/shared/ are imported by components (compiled into them).
  for (const file of (await readdir(SHARED)).sort()) hash.update(`\0${file}\0`).update(await readFile(join(SHARED, file)));
  for (const pkg of ["@bytecodealliance/jco", "@bytecodealliance/componentize-js", "componentize-qjs"]) {
    const manifest = JSON.parse(await readFile(join(ROOT, "node_modules", pkg, "package.json"), "utf8")) as { version: string };
    hash.update(`${pkg}@${manifest.version}`);
  }
  return hash.digest("hex");
}

async function sourceHash(spec: Spec, toolchain: string): Promise<string> {
  const hash = createHash("sha256").update(toolchain);
  const entries = await readdir(spec.dir, { recursive: true, withFileTypes: true });
  const files = entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  for (const file of files) hash.update(`\0${file.slice(spec.dir.length)}\0`).update(await readFile(file));
  return hash.digest("hex");
}

/** The kept component when its stamp matches, otherwise the job that rebuilds it. */
async function checkStamp(spec: Spec, outDir: string, toolchain: string): Promise<BuiltComponent | Job> {
  const started = performance.now();
  const out = join(outDir, `${spec.name}.wasm`);
  const hash = await sourceHash(spec, toolchain);
  const [stamp, previous] = await Promise.all([readFile(`${out}.stamp`, "utf8").catch(() => ""), stat(out).catch(() => undefined)]);
  if (stamp === hash && previous) {
    return { name: spec.name, path: out, bytes: previous.size, ms: Math.round(performance.now() - started), rebuilt: false };
  }
  // Built beside the target and renamed, so neither an interrupted build nor two
  // concurrent ones (test files building in parallel) leave a truncated component.
  return { spec, out, tmp: `${out}.${process.pid}.tmp`, hash };
}

async function install(job: Job, ms: number): Promise<BuiltComponent> {
  await rename(job.tmp, job.out);
  await writeFile(`${job.out}.stamp`, job.hash);
  return { name: job.spec.name, path: job.out, bytes: (await stat(job.out)).size, ms, rebuilt: true };
}

async function buildWat({ spec, tmp }: Job): Promise<{ ms: number } | { error: string }> {
  const started = performance.now();
  try {
    const { parse, componentEmbed, componentNew } = await import("@bytecodealliance/jco");
    const core = await parse(await readFile(join(spec.dir, "component.wat"), "utf8"));
    // The WIT goes in as source text: jco's own file reads would need the WASI shim's preopens.
    const embedded = await componentEmbed({ binary: core, witSource: await readFile(ENV_WIT, "utf8"), world: spec.world });
    await writeFile(tmp, await componentNew(embedded));
    return { ms: Math.round(performance.now() - started) };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * QuickJS: synchronous exports (a returned promise is not awaited, and promise jobs do not
 * run). Without features every WASI import is replaced by a trap, so the component imports
 * nothing but wit/env.wit; with any, it imports QuickJS's WASI world (cli, clocks, random and
 * filesystem, all provided without a grant but the filesystem's preopens).
 */
async function buildQuickJs({ spec, tmp }: Job): Promise<{ ms: number } | { error: string }> {
  const started = performance.now();
  try {
    const { componentize } = await import("componentize-qjs");
    const jsPath = join(spec.dir, "component.js");
    const { component } = await componentize({
      witPath: ENV_WIT,
      world: spec.world,
      jsSource: await readFile(jsPath, "utf8"),
      jsPath,
      // Relative imports may reach beside the component (components/shared/, for those here).
      moduleRoot: dirname(spec.dir),
      sync: true,
      stubWasi: spec.features.length === 0,
    });
    await writeFile(tmp, component);
    return { ms: Math.round(performance.now() - started) };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/** Splits jobs round-robin into at most `count` non-empty shares. */
function shares<T>(items: T[], count: number): T[][] {
  const result: T[][] = Array.from({ length: Math.min(count, items.length) }, () => []);
  items.forEach((item, index) => result[index % result.length]?.push(item));
  return result;
}

/**
 * Runs this script as a child process that componentizes `jobs` in order,
 * reporting each over IPC. The child, not this process, sets the WASI shim's
 * preopens to "/" (see componentizeJobs), which must never happen in a process
 * that also runs guests.
 */
async function componentizeInChild(jobs: Job[], finish: (job: Job, outcome: { ms: number } | { error: string }) => Promise<void>): Promise<void> {
  // In the repository: componentize-js resolves a component's relative imports (../shared/) against
  // its working directory, and failed to find them when the build was started from elsewhere.
  const child = spawn(process.execPath, [BUILDER, "--componentize", JSON.stringify(jobs)], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe", "ipc"] });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const reported: Promise<void>[] = [];
  const pending = new Set(jobs);
  child.on("message", (report: JobReport) => {
    const job = jobs[report.index] as Job;
    pending.delete(job);
    reported.push(finish(job, report));
  });
  const code = await new Promise<number | null>((done, fail) => child.on("error", fail).on("close", done));
  for (const job of pending) reported.push(finish(job, { error: `componentize child exited with ${code} before finishing:\n${output.trim()}` }));
  await Promise.all(reported);
}

async function componentizeJobs(jobs: Job[]): Promise<void> {
  // componentize-js reads the WIT and the source through preview2-shim, which
  // starts with no preopens; this process exists only for the build.
  const { _setPreopens } = await import("@bytecodealliance/preview2-shim/filesystem");
  // Typed from the package's browser build; on Node a preopen maps to a host path.
  (_setPreopens as unknown as (preopens: Record<string, string>) => void)({ "/": "/" });
  const { componentize } = await import("@bytecodealliance/componentize-js");
  for (const [index, { spec, tmp }] of jobs.entries()) {
    const started = performance.now();
    const wit = spec.worldWit ? await stageWorld(spec) : undefined;
    let report: JobReport;
    try {
      const { component } = await componentize({
        sourcePath: join(spec.dir, "component.js"),
        witPath: wit ?? ENV_WIT,
        worldName: spec.world,
        disableFeatures: ENGINE_FEATURES.filter((feature) => !spec.features.includes(feature)),
      });
      await writeFile(tmp, component);
      report = { index, ms: Math.round(performance.now() - started) };
    } catch (error) {
      report = { index, error: error instanceof Error ? error.message : String(error) };
    } finally {
      if (wit) await rm(wit, { recursive: true, force: true });
    }
    await new Promise((sent) => process.send?.(report, sent));
  }
  process.disconnect?.();
}

/** A WIT directory: the component's world.wit with env.wit and the WASI packages as deps. */
async function stageWorld(spec: Spec): Promise<string> {
  const wasi = fileURLToPath(new URL(`../lib/wit/builtin/${WASI_VERSION}/`, import.meta.resolve("@bytecodealliance/jco")));
  const packages = await readdir(wasi).catch(() => {
    throw new Error(`WASI ${WASI_VERSION} WIT not found at ${wasi} (did the jco version change?)`);
  });
  const staged = await mkdtemp(join(tmpdir(), `wit-${spec.name}-`));
  await copyFile(join(spec.dir, "world.wit"), join(staged, "world.wit"));
  await mkdir(join(staged, "deps", "skillenv-env"), { recursive: true });
  await copyFile(ENV_WIT, join(staged, "deps", "skillenv-env", "env.wit"));
  for (const pkg of packages) {
    await mkdir(join(staged, "deps", pkg));
    await copyFile(join(wasi, pkg, "package.wit"), join(staged, "deps", pkg, "package.wit"));
  }
  return staged;
}

function summary({ name, bytes, ms, rebuilt }: BuiltComponent): string {
  return `${name.padEnd(24)} ${formatSize(bytes).padStart(9)} ${`${ms} ms`.padStart(9)}  ${rebuilt ? "built" : "up to date"}`;
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A command-line argument's component directory: the path when it is a directory, else the
 * directory of that name under components/ (so that `npm run build:components -- echo-wat`
 * builds one component from anywhere in the repository).
 */
async function componentDir(arg: string): Promise<string> {
  const isDir = (path: string) =>
    stat(path).then(
      (found) => found.isDirectory(),
      () => false,
    );
  if (await isDir(arg)) return resolve(arg);
  const named = join(SOURCES, arg);
  if (!arg.includes("/") && (await isDir(named))) return named;
  const names = (await componentDirs()).map((dir) => basename(dir));
  throw new Error(`${arg}: neither a directory nor a component of components/ (${names.join(", ")})`);
}

async function main(args: string[]): Promise<void> {
  if (args[0] === "--componentize") return componentizeJobs(JSON.parse(args[1] ?? "[]") as Job[]);
  const started = performance.now();
  const built = await buildComponents(args.length > 0 ? { dirs: await Promise.all(args.map(componentDir)) } : {});
  console.log(`${built.length} components ready in build/components/ (${Math.round(performance.now() - started)} ms)`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
