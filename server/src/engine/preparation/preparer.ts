import { fork, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ConnectError } from "@connectrpc/connect";
import { serviceError } from "../../errors/index.ts";
import { checkWorld } from "../component/index.ts";
import { PREPARED_FORMAT, toolchain, type Toolchain } from "./toolchain.ts";
import type { TranspileJob, TranspileReply } from "./transpile-worker.ts";
import type { ComponentRef, PreparedComponent, PreparedManifest } from "./types.ts";

export interface PreparerOptions {
  dataDir: string;
  /** Cap on each guest memory; part of the toolchain id. */
  memoryMib: number;
  /** Idle time after which the transpile process is stopped (it restarts on demand). */
  transpileIdleMs?: number;
}

export interface PreparerStats {
  /** Components transpiled (and instrumented) by this process. */
  transpiles: number;
  /** Components found already prepared on disk. */
  cacheHits: number;
  failures: number;
}

const GLUE_FILE = "glue.mjs";
const MANIFEST_FILE = "manifest.json";

/**
 * Prepares components: check them against the contract exactly as admission does
 * (server/src/engine/component), transpile with jco (async instantiation, JSPI), instrument every core
 * module for fuel, cap its memory, and persist the result under
 * `<dataDir>/prepared/<toolchain>/<component>/` so a restart (or a restarted worker) never
 * transpiles again. Concurrent preparations of one id share one promise.
 */
export class Preparer {
  readonly toolchain: Toolchain;
  /** `<dataDir>/prepared/<toolchain id>`. */
  readonly root: string;
  readonly stats: PreparerStats = { transpiles: 0, cacheHits: 0, failures: 0 };
  readonly #idleMs: number;
  readonly #inflight = new Map<string, Promise<PreparedComponent>>();
  #worker: ChildProcess | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  readonly #jobs = new Map<number, { resolve: (reply: TranspileReply) => void; reject: (error: Error) => void }>();
  #nextJob = 1;

  private constructor(options: PreparerOptions, chain: Toolchain) {
    this.toolchain = chain;
    this.root = join(options.dataDir, "prepared", chain.id);
    this.#idleMs = options.transpileIdleMs ?? 30_000;
  }

  static async create(options: PreparerOptions): Promise<Preparer> {
    const preparer = new Preparer(options, await toolchain(options.memoryMib));
    await mkdir(preparer.root, { recursive: true });
    return preparer;
  }

  /** The prepared component, from disk when present, else transpiled now. */
  prepare(ref: ComponentRef): Promise<PreparedComponent> {
    const existing = this.#inflight.get(ref.id);
    if (existing) return existing;
    const promise = this.#prepare(ref).catch((error: unknown) => {
      this.#inflight.delete(ref.id);
      this.stats.failures++;
      throw asPreparationFailure(ref.id, error);
    });
    this.#inflight.set(ref.id, promise);
    return promise;
  }

  /** The directory of a component id (which need not exist). */
  dirOf(id: string): string {
    return join(this.root, dirName(id));
  }

  /** The instrumented core modules of a prepared component: each as the glue names it, and its file. */
  coreModuleFiles(prepared: PreparedComponent): [string, string][] {
    return prepared.manifest.coreModules.map((name) => [name, join(prepared.dir, safeFileName(name))]);
  }

  /** The glue module of a prepared component. */
  glueFile(prepared: PreparedComponent): string {
    return join(prepared.dir, safeFileName(prepared.manifest.glue));
  }

  /** Deletes a prepared component found unusable (it is prepared again on next use). */
  async discard(id: string): Promise<void> {
    this.#inflight.delete(id);
    await rm(this.dirOf(id), { recursive: true, force: true });
  }

  async close(): Promise<void> {
    clearTimeout(this.#idleTimer);
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker) await stop(worker);
  }

  async #prepare(ref: ComponentRef): Promise<PreparedComponent> {
    const dir = this.dirOf(ref.id);
    const cached = await this.#readPrepared(ref.id, dir);
    if (cached) {
      this.stats.cacheHits++;
      return cached;
    }
    let bytes: Uint8Array;
    try {
      bytes = await ref.load();
    } catch (error) {
      throw new Error(`cannot load the component bytes: ${messageOf(error)}`);
    }
    // invalid_component or import_not_grantable, named in the preparation_failed message.
    const { world, imports } = checkWorld(bytes);
    const reply = await this.#transpile(bytes);
    if (!reply.ok) throw new Error(`${reply.stage} failed: ${reply.message}`);
    this.stats.transpiles++;
    const manifest: PreparedManifest = {
      format: PREPARED_FORMAT,
      id: ref.id,
      toolchain: this.toolchain.id,
      entrypoints: [world.entrypoint],
      imports,
      glue: GLUE_FILE,
      glueWarmUp: reply.glueWarmUp,
      glueSharedCodecs: reply.glueSharedCodecs,
      coreModules: reply.coreModules.map(([name]) => name),
      functionsInstrumented: reply.functionsInstrumented,
      memoryPages: this.toolchain.memoryPages,
      initialMemoryPages: reply.initialMemoryPages,
      componentBytes: bytes.byteLength,
      preparedAt: new Date().toISOString(),
      prepareMs: reply.ms,
    };
    // Written beside the target and renamed: a crash never leaves a half-written directory,
    // and of two processes preparing the same id, the first rename wins.
    const temp = join(this.root, `.tmp-${dirName(ref.id)}-${process.pid}-${randomBytes(4).toString("hex")}`);
    await mkdir(temp, { recursive: true });
    try {
      await writeFile(join(temp, GLUE_FILE), reply.glue);
      for (const [name, moduleBytes] of reply.coreModules) await writeFile(join(temp, safeFileName(name)), moduleBytes);
      await writeFile(join(temp, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
      try {
        await rename(temp, dir);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
        const winner = await this.#readPrepared(ref.id, dir);
        if (!winner) throw error;
        return winner;
      }
    } finally {
      await rm(temp, { recursive: true, force: true });
    }
    return { id: ref.id, dir, manifest, glueUrl: pathToFileURL(join(dir, GLUE_FILE)).href, fromCache: false };
  }

  /** A complete prepared directory of this toolchain, or undefined (an unusable one is removed). */
  async #readPrepared(id: string, dir: string): Promise<PreparedComponent | undefined> {
    let manifest: PreparedManifest;
    try {
      manifest = JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")) as PreparedManifest;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      await rm(dir, { recursive: true, force: true });
      return undefined;
    }
    const complete =
      manifest.format === PREPARED_FORMAT &&
      manifest.toolchain === this.toolchain.id &&
      manifest.id === id &&
      Array.isArray(manifest.coreModules) &&
      (await Promise.all([manifest.glue, ...manifest.coreModules].map((name) => exists(join(dir, safeFileName(name)))))).every(Boolean);
    if (!complete) {
      await rm(dir, { recursive: true, force: true });
      return undefined;
    }
    return { id, dir, manifest, glueUrl: pathToFileURL(join(dir, manifest.glue)).href, fromCache: true };
  }

  #transpile(bytes: Uint8Array): Promise<TranspileReply> {
    clearTimeout(this.#idleTimer);
    const worker = this.#ensureWorker();
    const job = this.#nextJob++;
    return new Promise<TranspileReply>((resolve, reject) => {
      this.#jobs.set(job, { resolve, reject });
      const message: TranspileJob = { job, bytes, memoryPages: this.toolchain.memoryPages };
      worker.send(message);
    });
  }

  #ensureWorker(): ChildProcess {
    if (this.#worker) return this.#worker;
    // jco may print; nothing of it belongs in the service's logs. Advanced serialization carries
    // the bytes as Uint8Arrays. No inherited flags (a profiler, an inspector port).
    const worker = fork(fileURLToPath(new URL("./transpile-worker.ts", import.meta.url)), [], {
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      serialization: "advanced",
      execArgv: [],
    });
    // Like an unref'd thread, it never keeps the server's process alive.
    worker.unref();
    worker.channel?.unref();
    worker.on("message", (reply: TranspileReply) => {
      const pending = this.#jobs.get(reply.job);
      this.#jobs.delete(reply.job);
      pending?.resolve(reply);
      if (this.#jobs.size === 0) this.#scheduleIdleStop(worker);
    });
    const fail = (error: Error) => {
      if (this.#worker === worker) this.#worker = undefined;
      for (const pending of this.#jobs.values()) pending.reject(error);
      this.#jobs.clear();
    };
    worker.on("error", (error) => fail(new Error(`the transpile process failed: ${error.message}`)));
    worker.on("exit", (code, signal) => fail(new Error(`the transpile process exited (${signal ?? `code ${code}`})`)));
    this.#worker = worker;
    return worker;
  }

  #scheduleIdleStop(worker: ChildProcess): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      if (this.#worker === worker && this.#jobs.size === 0) {
        this.#worker = undefined;
        void stop(worker);
      }
    }, this.#idleMs);
    this.#idleTimer.unref();
  }
}

/** Ends the transpile process and resolves once it is gone. */
async function stop(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  worker.ref(); // so that the process waits for the exit it awaits
  worker.kill("SIGKILL");
  await exited;
}

/** A component id as one path segment: itself when plainly safe, else a hash of it. */
function dirName(id: string): string {
  if (/^[A-Za-z0-9_-][A-Za-z0-9._:-]{0,127}$/.test(id)) return id;
  return `h-${createHash("sha256").update(id).digest("hex")}`;
}

/** jco's file names are plain (`component.core2.wasm`); anything else is refused. */
function safeFileName(name: string): string {
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(name)) throw new Error(`unexpected prepared file name ${JSON.stringify(name)}`);
  return name;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

function messageOf(error: unknown): string {
  if (error instanceof ConnectError) return error.rawMessage;
  return error instanceof Error ? error.message : String(error);
}

/** preparation_failed naming the component and the cause (already-classified errors pass). */
export function asPreparationFailure(id: string, error: unknown): Error {
  if (error instanceof Error && (error as { preparationFailure?: boolean }).preparationFailure) return error;
  const failure = serviceError("preparation_failed", `preparing component ${id} failed: ${messageOf(error)}`);
  Object.defineProperty(failure, "preparationFailure", { value: true });
  return failure;
}
