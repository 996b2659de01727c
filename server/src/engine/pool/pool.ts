import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { mkdir, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path, { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { describeError } from "../../errors/index.ts";
import { asPreparationFailure, memoryPages, Preparer, type PreparedComponent } from "../preparation/index.ts";
import { PAGE_BYTES } from "../wasm/index.ts";
import type { FailureBody, FromWorker, LeaseRequest, ToWorker, WorkerReceipt, WorkspaceDirectory } from "./protocol.ts";
import { readSecrets } from "./secrets.ts";
import type {
  ComponentRef,
  HostServices,
  Invocation,
  InvocationKind,
  InvocationObserver,
  PoolOptions,
  PoolStats,
  WorkspaceLoad,
  Receipt,
  WorkerReport,
  WorkerStats,
} from "./types.ts";
import { POOL_DEFAULTS } from "./defaults.ts";
import { fillCompileCache } from "./compile-cache.ts";
import { FairQueue } from "./fair-queue.ts";
import { WorkerProcess } from "./worker-process.ts";
import { WorkspaceQuotas } from "./workspace-quotas.ts";

/**
 * How long past an invocation's deadline a guest computing on its worker may go on before the
 * worker's watchdog stops the process (a guest waiting on the host is timed out by its worker at
 * the deadline itself). The pool's own timer ends an invocation without a receipt `timeout` a
 * grace later still (a guest queued behind one that computes), so that a computing guest's
 * watchdog, which also replaces the worker, normally speaks first.
 */
export const DEADLINE_GRACE_MS = 100;
/**
 * After the pool ended an invocation `timeout` itself, how long its worker has to acknowledge
 * (send its late receipt) before the pool stops the worker: a backstop for a worker whose
 * watchdog did not act.
 */
const UNRESPONSIVE_MS = 5000;
/** Largest fuel budget: the counter is an i64 and must not wrap. */
const MAX_FUEL = 2 ** 62;
const MiB = 1024 * 1024;
const SPARE_FUEL = 100_000_000;

type Kind = "tool" | "loop";

interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** A worker went away (crash, deadline kill, close) before acknowledging a load. */
class WorkerGone extends Error {}

/**
 * The pool could not start because its worker processes could not: with a sandbox, typically
 * because bubblewrap is missing or cannot create namespaces on this host. The message says what
 * the first worker reported.
 */
export class WorkersDidNotStart extends Error {}

interface Compiled {
  prepared: PreparedComponent;
  /** Size of its core modules: what the compiled-code budget counts. */
  bytes: number;
  /** When it was last prepared or dispatched (the pool's use clock): the budget unloads the least recent. */
  used: number;
  /**
   * Larger than loadOnUseMib: loaded on one worker when prepared (where it is loaded or loading,
   * else on the worker holding the fewest bytes of code), and on every worker once `spread`.
   */
  loadOnUse: boolean;
  /** Invoked at least once since it was compiled: loaded on every worker, as a smaller one. */
  spread: boolean;
}

class WorkerHandle {
  readonly index: number;
  readonly process: WorkerProcess;
  state: "starting" | "ready" | "dead" = "starting";
  tools = 0;
  loops = 0;
  readonly flights = new Set<Flight>();
  readonly loads = new Map<string, Deferred>();
  readonly loaded = new Set<string>();
  /** Callers of Pool.report waiting for the worker's answer, in order. */
  readonly reports: Deferred<WorkerReport>[] = [];
  readonly ready = deferred();
  /** Settles when a replacement took this worker's place (or the pool closed). */
  readonly replaced = deferred();
  /** Settles when its process is gone (and its directories with it). */
  readonly exited = deferred();
  /** The worker reported ready at least once (a worker dying before that backs off). */
  readyOnce = false;
  /** A guest has held its thread for a while (its watchdog says): new work goes elsewhere if it can. */
  busy = false;
  /** Its process has exited (and everything it wrote has been read). */
  gone = false;
  /** Invocations in flight on it, by workspace. */
  readonly tenants = new Map<string, number>();
  /**
   * The workspaces that had invocations on the worker it replaces: until it is ready, it counts
   * as theirs in their share, so that a workspace whose guests got its worker stopped waits for
   * the replacement instead of taking another workspace's worker meanwhile.
   */
  readonly inherited: ReadonlySet<string>;
  /**
   * Once it is dead, the workspaces its replacement inherits: until the replacement takes its
   * place, the dead worker counts as theirs in their share, so that the invocations its loss
   * ends or frees do not send them to another workspace's worker meanwhile.
   */
  heirs: ReadonlySet<string> = new Set();
  /** What its invocations in flight are told when it is lost. */
  lostReason = "";

  constructor(index: number, inherited: ReadonlySet<string>, create: (handle: WorkerHandle) => WorkerProcess) {
    this.index = index;
    this.inherited = inherited;
    this.process = create(this);
  }
}

interface Flight {
  n: number;
  id: string;
  handle: WorkerHandle;
  kind: Kind;
  /** The workspace it runs for (its share of the pool). */
  tenant: string;
  started: number;
  host: HostServices | undefined;
  network: readonly string[];
  /** The binding's /workspace, when the grant has one. */
  workspace: string | undefined;
  /** It holds a place in its workspace's quota ledger (to be ended with it). */
  inLedger: boolean;
  /** Bytes of workspace quota leased to it, in all. */
  leased: number;
  timer: NodeJS.Timeout | undefined;
  /** The invoke message went to the worker. (Whether its guest started, its worker's start register says.) */
  posted: boolean;
  /** The worker's watchdog named it: its guest computed past the deadline. */
  overran: boolean;
  /** Progress events passed on to its host, and dropped past the limits (here, or in its worker). */
  emits: number;
  emitsDropped: number;
  /** Its caller has its receipt: nothing more of it reaches the host. */
  answered: boolean;
  /**
   * Its place in the pool is given back: its slot, its workspace's share and its place among its
   * worker's tenants. Later than `answered` for an invocation the pool timed out itself, whose
   * guest still holds its worker until the worker acknowledges or is stopped.
   */
  settled: boolean;
  resolve(receipt: Receipt): void;
}

/** An invocation waiting for a slot (its tenant's share, or any at all). Nothing of it has run. */
interface Waiting {
  invocation: Invocation;
  compiled: Compiled;
  started: number;
  deadline: number;
  secrets: ReadonlyMap<string, string>;
  kind: Kind;
  tenant: string;
  timer: NodeJS.Timeout;
  /** Undoes what waiting set up (its timer, its cancel listener), once it starts or ends. */
  stopWaiting(): void;
  resolve(receipt: Receipt): void;
}

type Outcome = Receipt extends infer R ? (R extends unknown ? Omit<R, "durationMs"> : never) : never;

/**
 * The service environment's worker pool: `workers` OS processes, each in its own sandbox, each
 * running both agent loops and tools, every invocation in a fresh instance. See
 * docs/environments.md.
 */
export class Pool {
  readonly #options: Required<PoolOptions>;
  readonly #preparer: Preparer;
  /** `<dataDir>/invocations/<pid>-<random>`: the workers' directories. */
  readonly #runtimeDir: string;
  /** A short directory for the workers' egress sockets. */
  readonly #socketDir: string;
  /** `<dataDir>/compile-cache`: the workers' own code, compiled (compile-cache.ts). */
  readonly #compileCache: string;
  readonly #quotas: WorkspaceQuotas;
  readonly #workers: WorkerHandle[] = [];
  readonly #components = new Map<string, Compiled>();
  readonly #observers: InvocationObserver[] = [];
  readonly #preparing = new Map<string, Promise<void>>();
  readonly #flights = new Map<number, Flight>();
  /** Each kind of slot shared out between workspaces. */
  readonly #queues: Record<Kind, FairQueue<Waiting>>;
  /** Invocations the pool ended `timeout` itself whose worker has not acknowledged them yet. */
  readonly #unacknowledged = new Map<number, NodeJS.Timeout>();
  /** Why a component must stay compiled now: its loads, its invocations waiting or in flight. */
  readonly #pins = new Map<string, number>();
  #clock = 0;
  #unloads = 0;
  /** Unloaded components not compiled again since; compiling one again is a reload from its prepared files. */
  readonly #unloaded = new Set<string>();
  #reloads = 0;
  readonly #bootFailures: number[] = [];
  #next = 1;
  #rotation = 0;
  #replacements = 0;
  #spawns = 0;
  #closed: Promise<void> | undefined;
  /** Set as close() begins: nothing new starts. */
  #closing = false;

  private constructor(options: Required<PoolOptions>, preparer: Preparer, directories: { runtime: string; sockets: string; compileCache: string }) {
    this.#options = options;
    this.#preparer = preparer;
    this.#runtimeDir = directories.runtime;
    this.#socketDir = directories.sockets;
    this.#compileCache = directories.compileCache;
    this.#quotas = new WorkspaceQuotas(options.workspaceQuotaBytes);
    this.#queues = {
      tool: new FairQueue(options.workspaceToolSlots, options.queueLength),
      loop: new FairQueue(options.workspaceAgentLoopSlots, options.queueLength),
    };
  }

  /**
   * Starts the workers; resolves when every one is ready. Rejects when one cannot start (with a
   * sandbox, typically because bubblewrap is missing or cannot create namespaces here: the
   * message says so, and what SERVICE_ENV_SANDBOX=off would give up).
   */
  static async start(options: PoolOptions): Promise<Pool> {
    const normalized = normalize(options);
    const preparer = await Preparer.create({ dataDir: normalized.dataDir, memoryMib: normalized.memoryMib });
    await mkdir(normalized.workspaceRoot, { recursive: true, mode: 0o700 });
    const compileCache = join(normalized.dataDir, "compile-cache");
    try {
      await fillCompileCache({ sandbox: normalized.sandbox, path: compileCache });
    } catch (error) {
      throw new WorkersDidNotStart(`the worker pool failed to start: ${messageOf(error)}`);
    }
    const runtimeDir = await runtimeDirectory(normalized.dataDir);
    const socketDir = mkdtempSync(join(tmpdir(), "skillenv-egress-"));
    const pool = new Pool(normalized, preparer, { runtime: runtimeDir, sockets: socketDir, compileCache });
    for (let index = 0; index < normalized.workers; index++) pool.#workers.push(pool.#spawn(index));
    try {
      await Promise.all(pool.#workers.map((handle) => handle.ready.promise));
    } catch (error) {
      await pool.close();
      throw new WorkersDidNotStart(`the worker pool failed to start: ${error instanceof Error ? error.message : String(error)}`);
    }
    return pool;
  }

  /**
   * Prepares a component and loads it on every worker (one worker, for a component larger than
   * loadOnUseMib not yet invoked); resolves when they are ready. Concurrent calls for one id share
   * the work; a prepared component stays loaded for the pool's lifetime (replacement workers load
   * again what their predecessor held before taking work), unless compiledMemoryMib is set and it
   * is unloaded to keep within it. Rejects with preparation_failed.
   */
  prepare(component: ComponentRef): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("the worker pool is closed"));
    // Preparing again checks current readiness: a replacement worker may still be loading.
    const compiled = this.#components.get(component.id);
    if (compiled) {
      compiled.used = ++this.#clock;
      return this.#loadWhereNeeded(component.id).catch((error: unknown) => {
        throw asPreparationFailure(component.id, new Error(`loading on the workers: ${messageOf(error)}`));
      });
    }
    const existing = this.#preparing.get(component.id);
    if (existing) return existing;
    const promise = this.#prepare(component);
    this.#preparing.set(component.id, promise);
    // Forgotten once settled: a component unloaded later is prepared again (from its files).
    const forget = () => {
      if (this.#preparing.get(component.id) === promise) this.#preparing.delete(component.id);
    };
    promise.then(forget, forget);
    return promise;
  }

  /**
   * Whether the component is prepared and loaded on every current worker (on one at least, for a
   * component larger than loadOnUseMib: the others load it when it is invoked).
   */
  isPrepared(id: string): boolean {
    const compiled = this.#components.get(id);
    if (!compiled) return false;
    const ready = (handle: WorkerHandle) => handle.state !== "dead" && handle.loaded.has(id);
    return compiled.loadOnUse ? this.#workers.some(ready) : this.#workers.every(ready);
  }

  /**
   * Runs one invocation in a fresh instance and returns its receipt; never throws. Without a free
   * slot of its kind it fails at once with `pool_saturated`.
   */
  invoke(invocation: Invocation): Promise<Receipt> {
    const receipt = this.#invoke(invocation);
    if (this.#observers.length === 0) return receipt;
    return receipt.then((settled) => {
      const kind: InvocationKind = invocation.entrypoint === "turn" ? "agent_loop" : invocation.program ? "program" : "tool";
      for (const observe of this.#observers) observe({ kind, receipt: settled });
      return settled;
    });
  }

  /**
   * One workspace's part of the pool now: the slots counted against its share (its invocations
   * running, and dead workers it inherits until replaced) and its invocations waiting, by kind.
   */
  workspaceLoad(workspace: string): WorkspaceLoad {
    const { tool, loop } = this.#queues;
    return {
      inFlight: { tools: tool.running(workspace), agentLoops: loop.running(workspace) },
      waiting: { tools: tool.waitingOf(workspace), agentLoops: loop.waitingOf(workspace) },
    };
  }

  /** Told of every invocation's receipt (the metrics): its kind, outcome, duration and fuel, nothing of its input or output. */
  observeInvocations(observer: InvocationObserver): void {
    this.#observers.push(observer);
  }

  #invoke(invocation: Invocation): Promise<Receipt> {
    const started = performance.now();
    if (this.#closed) return Promise.resolve(done(started, failure("unavailable", "the worker pool is closed")));
    const compiled = this.#components.get(invocation.component.id);
    if (compiled) return this.#dispatch(invocation, compiled, started);
    return this.#prepareAndDispatch(invocation, started);
  }

  /**
   * Something other than an invocation changed a binding's workspace (staging files, removing
   * it): its usage is measured again before its next invocation counts against its quota.
   */
  workspaceChanged(workspaceDir: string): void {
    this.#quotas.forget(workspaceDir);
  }

  /**
   * Prepares (or reloads an unloaded component from its prepared files), then dispatches. The pin
   * keeps the budget from unloading the component between the two steps; should it be gone all
   * the same (unloaded right as its preparation settled), it is prepared again.
   */
  async #prepareAndDispatch(invocation: Invocation, started: number): Promise<Receipt> {
    const id = invocation.component.id;
    this.#pin(id);
    try {
      for (;;) {
        try {
          await this.prepare(invocation.component);
        } catch (error) {
          return done(started, failure("preparation_failed", messageOf(error)));
        }
        if (this.#closed) return done(started, failure("unavailable", "the worker pool is closed"));
        const ready = this.#components.get(id);
        if (ready) return await this.#dispatch(invocation, ready, started);
      }
    } finally {
      this.#unpin(id);
    }
  }

  stats(): PoolStats {
    const workers: WorkerStats[] = this.#workers.map((handle) => ({
      index: handle.index,
      pid: handle.process.pid,
      state: handle.state,
      busy: handle.busy,
      tools: handle.tools,
      agentLoops: handle.loops,
      running: runningOn(handle),
      loaded: handle.loaded.size,
    }));
    const live = this.#workers.filter((handle) => handle.state !== "dead").length;
    return {
      workers,
      prepared: this.#components.size,
      compiledBytes: this.#compiledBytes(),
      unloads: this.#unloads,
      transpiles: this.#preparer.stats.transpiles,
      // The Preparer remembers what it prepared, so a reload reads the prepared files without asking it.
      preparedFromDisk: this.#preparer.stats.cacheHits + this.#reloads,
      replacements: this.#replacements,
      inFlight: {
        tools: workers.reduce((sum, worker) => sum + worker.tools, 0),
        agentLoops: workers.reduce((sum, worker) => sum + worker.agentLoops, 0),
      },
      waiting: { tools: this.#queues.tool.waiting, agentLoops: this.#queues.loop.waiting },
      capacity: { tools: live * this.#options.toolSlotsPerWorker, agentLoops: live * this.#options.agentLoopSlotsPerWorker },
    };
  }

  /**
   * What worker `index` reports of itself (its spare instances, loaded components, memory), once
   * it has handled the messages sent to it before. Rejects when it is not running.
   */
  report(index: number): Promise<WorkerReport> {
    const handle = this.#workers[index];
    if (!handle || handle.state === "dead") return Promise.reject(new Error(`worker ${index} is not running`));
    const query = deferred<WorkerReport>();
    handle.reports.push(query);
    this.#post(handle, { type: "report" });
    return query.promise;
  }

  /** Stops and reaps every worker; invocations in flight end `unknown`. */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    for (const waiting of [...this.#queues.tool.drain(), ...this.#queues.loop.drain()]) {
      waiting.stopWaiting();
      waiting.resolve(done(waiting.started, failure("unavailable", "the worker pool was closed while the invocation waited for a slot; it did not run")));
    }
    const gone = this.#workers.map((handle) => handle.exited.promise);
    for (const handle of this.#workers) {
      this.#retire(handle, "the worker pool was closed during the invocation", false);
      handle.replaced.resolve();
    }
    await Promise.all(gone);
    for (const timer of this.#unacknowledged.values()) clearTimeout(timer);
    await this.#preparer.close();
    await rm(this.#runtimeDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }).catch(() => undefined);
    await rm(this.#socketDir, { recursive: true, force: true }).catch(() => undefined);
  }

  async #prepare(component: ComponentRef): Promise<void> {
    const id = component.id;
    let prepared = await this.#preparer.prepare(component);
    if (this.#closed) throw new Error("the worker pool is closed");
    this.#components.set(id, await this.#compiled(prepared));
    // Room is made before the workers load it; being the most recently used, it is not unloaded itself.
    this.#fitBudget();
    try {
      await this.#loadWhereNeeded(id);
    } catch (error) {
      this.#components.delete(id);
      if (!prepared.fromCache) throw asPreparationFailure(id, new Error(`loading on the workers: ${messageOf(error)}`));
      // A damaged prepared directory: prepare once more from the component's bytes.
      await this.#preparer.discard(id);
      prepared = await this.#preparer.prepare(component);
      this.#components.set(id, await this.#compiled(prepared));
      try {
        await this.#loadWhereNeeded(id);
      } catch (again) {
        this.#components.delete(id);
        throw asPreparationFailure(id, new Error(`loading on the workers: ${messageOf(again)}`));
      }
    }
    if (this.#unloaded.delete(id)) this.#reloads++;
  }

  async #compiled(prepared: PreparedComponent): Promise<Compiled> {
    const sizes = await Promise.all(this.#preparer.coreModuleFiles(prepared).map(([, file]) => stat(file).then((stats) => stats.size)));
    const bytes = sizes.reduce((sum, size) => sum + size, 0);
    return { prepared, bytes, used: ++this.#clock, loadOnUse: bytes > this.#options.loadOnUseMib * MiB, spread: false };
  }

  async #loadWhereNeeded(id: string): Promise<void> {
    this.#pin(id);
    try {
      await this.#loadOnWorkers(id);
    } finally {
      this.#unpin(id);
    }
  }

  async #loadOnWorkers(id: string): Promise<void> {
    for (;;) {
      if (this.#closed) throw new Error("the worker pool is closed");
      const handles = this.#placesOf(id);
      for (const handle of handles) this.#sendLoad(handle, id);
      const results = await Promise.allSettled(handles.map((handle) => handle.loads.get(id)?.promise ?? Promise.reject(new WorkerGone())));
      const failed = results.find((result) => result.status === "rejected" && !(result.reason instanceof WorkerGone));
      if (failed) throw (failed as PromiseRejectedResult).reason;
      const settled = handles.every((handle) => this.#workers[handle.index] === handle && handle.state !== "dead" && handle.loaded.has(id));
      if (settled) return;
      // Some worker went away meanwhile: its replacement restores every prepared component.
      await Promise.all(handles.filter((handle) => handle.state === "dead").map((handle) => handle.replaced.promise));
    }
  }

  /**
   * The workers a component is to be loaded on now: every one; or, for one loaded on use and not
   * yet invoked, one: a live worker that holds it or is loading it, else the live worker holding
   * the fewest bytes of code.
   */
  #placesOf(id: string): WorkerHandle[] {
    const compiled = this.#components.get(id);
    const live = this.#workers.filter((handle) => handle.state !== "dead");
    if (!compiled?.loadOnUse || compiled.spread || live.length === 0) return [...this.#workers];
    const holder = live.find((handle) => handle.loaded.has(id)) ?? live.find((handle) => handle.loads.has(id));
    if (holder) return [holder];
    const bytes = (handle: WorkerHandle) => [...handle.loads.keys()].reduce((sum, other) => sum + (this.#components.get(other)?.bytes ?? 0), 0);
    return [live.reduce((least, handle) => (bytes(handle) < bytes(least) ? handle : least))];
  }

  #sendLoad(handle: WorkerHandle, id: string): void {
    if (handle.state === "dead" || handle.loads.has(id)) return;
    const compiled = this.#components.get(id);
    if (!compiled) return;
    handle.loads.set(id, deferred());
    const { prepared } = compiled;
    const { entrypoints, imports, initialMemoryPages } = prepared.manifest;
    this.#post(handle, {
      type: "load",
      component: id,
      glue: this.#preparer.glueFile(prepared),
      coreModules: this.#preparer.coreModuleFiles(prepared),
      facts: { entrypoints, imports, initialMemoryBytes: initialMemoryPages * PAGE_BYTES },
    });
  }

  #dispatch(invocation: Invocation, compiled: Compiled, started: number): Promise<Receipt> {
    compiled.used = ++this.#clock;
    const refused = refusal(invocation, compiled, this.#options.workspaceRoot);
    if (refused) return Promise.resolve(done(started, failure(refused.code, refused.message)));
    if (!compiled.spread) {
      // In use: every worker loads it now (meanwhile, its invocations prefer a worker that holds it).
      compiled.spread = true;
      for (const handle of this.#workers) this.#sendLoad(handle, compiled.prepared.id);
    }
    const secrets = readSecrets(invocation.grants.secrets, invocation.secretSource);
    if (!(secrets instanceof Map)) return Promise.resolve(done(started, failure(secrets.code, secrets.message)));
    const now = Date.now();
    const deadline = Math.min(invocation.deadlineMs, now + this.#options.maxTurnSecs * 1000);
    if (!(deadline > now)) return Promise.resolve(done(started, failure("timeout", "the deadline had passed before the invocation started")));
    const kind: Kind = invocation.entrypoint === "turn" ? "loop" : "tool";
    const tenant = invocation.tenant ?? "";
    if (this.#queues[kind].mayStart(tenant)) {
      const handle = this.#pick(kind, tenant, compiled.prepared.id);
      if (handle) {
        let resolve!: (receipt: Receipt) => void;
        const promise = new Promise<Receipt>((res) => (resolve = res));
        this.#start(handle, { invocation, started, deadline, secrets, kind, tenant, resolve });
        return promise;
      }
    }
    return this.#wait(invocation, compiled, started, deadline, secrets, kind, tenant);
  }

  /**
   * Queues an invocation that cannot start now (its workspace holds its share of slots of this
   * kind, or every slot is taken) until a slot is its turn; refuses it at once with
   * `pool_saturated` when its workspace's queue is full. Its deadline and its cancellation end the
   * wait; nothing of it has run then.
   */
  #wait(
    invocation: Invocation,
    compiled: Compiled,
    started: number,
    deadline: number,
    secrets: ReadonlyMap<string, string>,
    kind: Kind,
    tenant: string,
  ): Promise<Receipt> {
    let resolve!: (receipt: Receipt) => void;
    const promise = new Promise<Receipt>((res) => (resolve = res));
    const queue = this.#queues[kind];
    const end = (outcome: Outcome) => {
      if (!queue.remove(tenant, waiting)) return;
      waiting.stopWaiting();
      resolve(done(started, outcome));
    };
    const onAbort = () => end(failure("cancelled", "the invocation was cancelled while it waited for a slot; it did not run"));
    const waiting: Waiting = {
      invocation,
      compiled,
      started,
      deadline,
      secrets,
      kind,
      tenant,
      resolve,
      timer: setTimeout(
        () => end(failure("timeout", "the invocation's deadline passed while it waited for a slot of the worker pool; it did not run")),
        Math.max(0, deadline - Date.now()),
      ),
      stopWaiting: () => {
        clearTimeout(waiting.timer);
        invocation.signal?.removeEventListener("abort", onAbort);
        this.#unpin(compiled.prepared.id);
      },
    };
    if (!queue.enqueue(tenant, waiting)) {
      clearTimeout(waiting.timer);
      const capacity = this.stats().capacity;
      const slots = kind === "tool" ? `${capacity.tools} tool` : `${capacity.agentLoops} agent-loop`;
      return Promise.resolve(
        done(
          started,
          failure(
            "pool_saturated",
            `the worker pool's ${slots} slots are busy and this workspace already has ${this.#options.queueLength} invocations of this kind waiting; the invocation was not started`,
          ),
        ),
      );
    }
    // It stays compiled while it waits.
    this.#pin(compiled.prepared.id);
    invocation.signal?.addEventListener("abort", onAbort, { once: true });
    if (invocation.signal?.aborted) onAbort();
    return promise;
  }

  /** Gives freed slots of `kind` to waiting invocations, workspaces in turn, while there are both. */
  #drain(kind: Kind): void {
    if (this.#closing) return;
    const queue = this.#queues[kind];
    while (queue.waiting > 0) {
      const next = queue.next((tenant) => this.#pick(kind, tenant) !== undefined);
      if (!next) return;
      const waiting = next.item;
      const handle = this.#pick(kind, next.tenant, waiting.compiled.prepared.id)!;
      waiting.stopWaiting();
      if (!(waiting.deadline > Date.now())) {
        waiting.resolve(
          done(waiting.started, failure("timeout", "the invocation's deadline passed while it waited for a slot of the worker pool; it did not run")),
        );
        continue;
      }
      this.#start(handle, waiting);
    }
  }

  /** Takes a slot of `handle` for the invocation and sends it (after its workspace lease, if it needs one). */
  #start(handle: WorkerHandle, { invocation, started, deadline, secrets, kind, tenant, resolve }: Omit<Waiting, "timer" | "stopWaiting" | "compiled">): void {
    if (kind === "tool") handle.tools++;
    else handle.loops++;
    handle.tenants.set(tenant, (handle.tenants.get(tenant) ?? 0) + 1);
    this.#queues[kind].started(tenant);
    const n = this.#next++;
    const workspace = invocation.grants.filesystem.workspace ? invocation.workspaceDir : undefined;
    const flight: Flight = {
      n,
      id: invocation.component.id,
      handle,
      kind,
      tenant,
      started,
      host: invocation.host,
      network: invocation.grants.network,
      workspace,
      inLedger: false,
      leased: 0,
      timer: undefined,
      posted: false,
      overran: false,
      emits: 0,
      emitsDropped: 0,
      answered: false,
      settled: false,
      resolve,
    };
    this.#flights.set(n, flight);
    handle.flights.add(flight);
    this.#pin(flight.id);
    // Loaded ahead of the invocation if this worker does not hold it (a replacement, say): the
    // worker handles its messages in order and awaits a load in progress.
    this.#sendLoad(handle, flight.id);
    invocation.signal?.addEventListener("abort", () => this.#cancel(flight), { once: true });
    if (invocation.signal?.aborted) this.#cancel(flight);
    if (workspace === undefined) {
      this.#send(flight, invocation, deadline, secrets, undefined);
    } else {
      const writable = invocation.grants.filesystem.workspace === "write";
      this.#quotas.begin(workspace).then(
        (lease) => {
          // Cancelled while the workspace was measured: its place in the ledger ends here.
          if (flight.settled) {
            this.#quotas.end(workspace, lease, 0);
            return;
          }
          flight.inLedger = true;
          flight.leased = lease;
          this.#send(flight, invocation, deadline, secrets, { dir: workspace, lease, limited: writable && this.#quotas.limited });
        },
        (error: unknown) => this.#settle(flight, failure("internal", `cannot measure the workspace: ${messageOf(error)}`)),
      );
    }
  }

  /** Before it was sent, nothing ran; after, the worker stops it when its guest is not on the thread. */
  #cancel(flight: Flight): void {
    if (flight.answered) return;
    if (!flight.posted) this.#settle(flight, failure("cancelled", "the invocation was cancelled before it started; it did not run"));
    else this.#post(flight.handle, { type: "cancel", invocation: flight.n });
  }

  #send(flight: Flight, invocation: Invocation, deadline: number, secrets: ReadonlyMap<string, string>, workspace: WorkspaceDirectory | undefined): void {
    if (flight.settled) return;
    const fuel = Math.floor(Math.min(Math.max(invocation.fuel ?? this.#options.fuel, 0), MAX_FUEL));
    flight.posted = true;
    // The egress of its worker admits what this invocation was granted from now on.
    this.#post(flight.handle, {
      type: "invoke",
      invocation: flight.n,
      component: invocation.component.id,
      entrypoint: invocation.entrypoint,
      input: invocation.input,
      configuration: invocation.configuration,
      deadlineMs: deadline,
      fuel,
      grants: invocation.grants,
      ...(workspace ? { workspace } : {}),
      scratchQuota: this.#options.scratchQuotaBytes,
      secrets: [...secrets],
      host: invocation.host !== undefined,
      ...(invocation.program ? { source: invocation.program.source } : {}),
    });
    flight.timer = setTimeout(() => this.#overran(flight), Math.max(0, deadline - Date.now()) + 2 * DEADLINE_GRACE_MS);
  }

  /**
   * The worker an invocation of `tenant` goes to: a live one with a free slot of its kind, among
   * the workers the tenant already uses when it uses its share of them (workspaceWorkers: a
   * workspace whose guests compute without end can hold only that many workers' threads, never
   * all of them; a replacement counts as the share of the workspaces its predecessor served until
   * it is ready). Preferred, in order: a worker whose thread no guest holds (a call sent to a busy
   * worker waits behind that guest's computation), a ready one, the fewest invocations of other workspaces
   * (workspaces keep to workers of their own where they can), the fewest of its kind, one that
   * holds the component `id` (another compiles it first: concurrent calls still spread while a
   * component loads on use), the fewest in all. Ties rotate, so consecutive calls alternate
   * between idle workers: each then has time to instantiate its next spare while the other one
   * serves.
   */
  #pick(kind: Kind, tenant: string, id?: string): WorkerHandle | undefined {
    const cap = kind === "tool" ? this.#options.toolSlotsPerWorker : this.#options.agentLoopSlotsPerWorker;
    const live = this.#workers.filter((handle) => handle.state !== "dead");
    const own = live.filter((handle) => handle.tenants.has(tenant) || (handle.state === "starting" && handle.inherited.has(tenant)));
    const beingReplaced = this.#workers.filter((handle) => handle.state === "dead" && handle.heirs.has(tenant)).length;
    const allowed = own.length + beingReplaced >= this.#options.workspaceWorkers ? own : live;
    const count = allowed.length;
    const first = count === 0 ? 0 : this.#rotation++ % count;
    let best: WorkerHandle | undefined;
    let bestScore: number[] = [];
    for (let i = 0; i < count; i++) {
      const handle = allowed[(first + i) % count]!;
      const used = kind === "tool" ? handle.tools : handle.loops;
      if (used >= cap) continue;
      const others = handle.tools + handle.loops - (handle.tenants.get(tenant) ?? 0);
      // Busy with nothing in flight is a report not yet overtaken by `free` (the watchdog looks every 20 ms).
      const busy = handle.busy && handle.flights.size > 0;
      // A worker still starting serves only once it has loaded every component (about a second).
      const starting = handle.state === "starting" ? 1 : 0;
      const unloaded = id === undefined || handle.loaded.has(id) ? 0 : 1;
      const score = [busy ? 1 : 0, starting, others, used, unloaded, handle.tools + handle.loops];
      if (!best || lexicallyLess(score, bestScore)) {
        best = handle;
        bestScore = score;
      }
    }
    return best;
  }

  /**
   * The deadline (plus grace) passed with no receipt. A guest computing past it is stopped by its
   * worker's watchdog (the worker process dies); a guest suspended, or still queued behind a
   * computing one on its worker, is ended `timeout` here, and its worker drops it when it gets to
   * it. Should the worker not acknowledge it at all, it is unresponsive and is stopped.
   */
  #overran(flight: Flight): void {
    if (flight.answered) return;
    // Answered, but it keeps its place until its worker lets go of it: its guest may still hold
    // the worker's thread, and the worker is then its workspace's (and busy) for #pick.
    this.#answer(flight, failure("timeout", "the invocation passed its deadline"));
    this.#post(flight.handle, { type: "cancel", invocation: flight.n });
    const handle = flight.handle;
    this.#unacknowledged.set(
      flight.n,
      setTimeout(() => {
        this.#unacknowledged.delete(flight.n);
        if (handle.state !== "dead") handle.process.kill();
      }, UNRESPONSIVE_MS).unref(),
    );
  }

  /**
   * Ends a flight with `outcome`. `growth`, the bytes it added to its workspace, is known only
   * when its worker reported it; without it (a lost worker, an invocation ended here) the
   * workspace is measured again before its next use.
   */
  #settle(flight: Flight, outcome: Outcome, growth?: number): void {
    this.#answer(flight, outcome);
    this.#release(flight, growth);
  }

  /** Gives the caller its receipt (once). */
  #answer(flight: Flight, outcome: Outcome): void {
    if (flight.answered) return;
    flight.answered = true;
    clearTimeout(flight.timer);
    if (flight.emitsDropped > 0) {
      try {
        flight.host?.dropped?.(flight.emitsDropped);
      } catch {
        // best effort, as emit
      }
    }
    flight.resolve(done(flight.started, outcome));
  }

  /** Gives back the flight's place in the pool (once), and its slot to the next invocation waiting. */
  #release(flight: Flight, growth?: number): void {
    if (flight.settled) return;
    flight.settled = true;
    this.#flights.delete(flight.n);
    flight.handle.flights.delete(flight);
    if (flight.kind === "tool") flight.handle.tools--;
    else flight.handle.loops--;
    this.#queues[flight.kind].ended(flight.tenant);
    const left = (flight.handle.tenants.get(flight.tenant) ?? 1) - 1;
    if (left > 0) flight.handle.tenants.set(flight.tenant, left);
    else flight.handle.tenants.delete(flight.tenant);
    if (flight.inLedger && flight.workspace !== undefined) this.#quotas.end(flight.workspace, flight.leased, flight.posted ? growth : 0);
    if (flight.network.length > 0) flight.handle.process.revokeEgress();
    this.#unpin(flight.id);
    // Its slot is free: the next invocation waiting for one, whichever workspace's turn it is.
    this.#drain(flight.kind);
  }

  #pin(id: string): void {
    this.#pins.set(id, (this.#pins.get(id) ?? 0) + 1);
  }

  /** A component that was kept over the budget by its pins may go once they are all released. */
  #unpin(id: string): void {
    const left = (this.#pins.get(id) ?? 1) - 1;
    if (left > 0) {
      this.#pins.set(id, left);
      return;
    }
    this.#pins.delete(id);
    this.#fitBudget();
  }

  #compiledBytes(): number {
    let total = 0;
    for (const compiled of this.#components.values()) total += compiled.bytes;
    return total;
  }

  /**
   * Keeps compiled code within compiledMemoryMib (0: unbounded) by unloading the least recently
   * used components that nothing pins. The most recently used one always stays, even alone over
   * the budget; pinned ones stay too, and the total may exceed the budget until they are released.
   */
  #fitBudget(): void {
    const budget = this.#options.compiledMemoryMib * MiB;
    if (budget === 0 || this.#closed) return;
    let total = this.#compiledBytes();
    if (total <= budget) return;
    const byUse = [...this.#components].sort(([, a], [, b]) => a.used - b.used);
    for (const [id, compiled] of byUse.slice(0, -1)) {
      if (total <= budget) return;
      if (this.#pins.has(id)) continue;
      this.#unload(id);
      total -= compiled.bytes;
    }
  }

  /** Drops a component's compiled code; its next invocation prepares it again from its prepared files. */
  #unload(id: string): void {
    this.#components.delete(id);
    this.#unloads++;
    this.#unloaded.add(id);
    for (const handle of this.#workers) {
      handle.loaded.delete(id);
      // A replacement worker may still be loading it: nobody needs that load any more.
      handle.loads.get(id)?.resolve();
      handle.loads.delete(id);
      this.#post(handle, { type: "unload", component: id });
    }
  }

  /**
   * Takes a worker out of service: in-flight invocations end `unknown` (`timeout` for the one its
   * watchdog stopped it for; `unavailable` for those whose guest had not started), pending loads fail over to the
   * replacement, and unless the pool is closing a replacement is spawned, which restores every
   * prepared component it held first.
   */
  #retire(handle: WorkerHandle, reason: string, replace: boolean): void {
    if (handle.state === "dead") return;
    // Read before its invocations are settled (which takes them out of `tenants`). When its
    // watchdog named the guests that computed past their deadline, their workspaces alone inherit
    // the replacement: another workspace's call that only waited there is not held to it.
    const overran = [...handle.flights].filter((flight) => flight.overran).map((flight) => flight.tenant);
    const heirs: ReadonlySet<string> = new Set(overran.length > 0 ? overran : handle.tenants.keys());
    handle.state = "dead";
    if (replace && !this.#closed) handle.heirs = heirs;
    handle.lostReason = reason;
    // Its invocations are settled once the process is gone (#exited): only then does its start
    // register hold every start it will ever record.
    if (handle.gone) this.#settleLost(handle);
    for (const load of handle.loads.values()) load.reject(new WorkerGone());
    for (const query of handle.reports.splice(0)) query.reject(new WorkerGone(reason));
    handle.ready.reject(new WorkerGone(reason));
    handle.process.kill();
    if (!replace || this.#closed) return;
    // A worker that died before ever becoming ready backs off before the next attempt.
    const failures = handle.loaded.size === 0 && !handle.readyOnce ? (this.#bootFailures[handle.index] ?? 0) + 1 : 0;
    this.#bootFailures[handle.index] = failures;
    const delay = failures === 0 ? 0 : Math.min(5000, 100 * 2 ** (failures - 1));
    const respawn = () => {
      if (this.#closed) {
        handle.replaced.resolve();
        return;
      }
      this.#workers[handle.index] = this.#spawn(handle.index, heirs, new Set(handle.loads.keys()));
      this.#replacements++;
      handle.replaced.resolve();
      // What its heirs have waiting goes to it now, to wait for it there.
      this.#drain("tool");
      this.#drain("loop");
    };
    if (delay === 0) respawn();
    else setTimeout(respawn, delay).unref();
  }

  /** A worker in place `index`; a replacement gets `inherited` (its predecessor's workspaces) and `held` (the components it held or was loading). */
  #spawn(index: number, inherited: ReadonlySet<string> = new Set(), held: ReadonlySet<string> = new Set()): WorkerHandle {
    const generation = ++this.#spawns;
    const handle = new WorkerHandle(
      index,
      inherited,
      (self) =>
        new WorkerProcess(
          {
            sandbox: this.#options.sandbox,
            boot: {
              memoryPages: memoryPages(this.#options.memoryMib),
              // Bounds how long start-up code of a spare may hold the thread (a spare whose start-up
              // needs more is not kept; the invocation then instantiates with its own budget).
              spareFuel: Math.min(this.#options.fuel, SPARE_FUEL),
              spareInstances: this.#options.spareInstances,
              spareMemoryBytes: this.#options.spareMemoryMib * MiB,
              deadlineGraceMs: DEADLINE_GRACE_MS,
              maxOpenFiles: this.#options.maxOpenFiles,
              maxEmits: this.#options.maxEmits,
              maxEmitBytes: this.#options.maxEmitBytes,
              niceness: POOL_DEFAULTS.workerNiceness,
            },
            directory: join(this.#runtimeDir, `worker-${generation}`),
            egressSocket: join(this.#socketDir, `${generation}.sock`),
            prepared: this.#preparer.root,
            compileCache: this.#compileCache,
            workspaceRoot: this.#options.workspaceRoot,
          },
          {
            message: (message) => this.#onMessage(self, message),
            overran: (n) => {
              const flight = this.#flights.get(n);
              if (flight && flight.handle === self) flight.overran = true;
            },
            busy: (busy) => {
              self.busy = busy;
            },
            lease: (request) => this.#lease(self, request),
            granted: () => [...self.flights].flatMap((flight) => flight.network),
            exit: (description, stderr) => this.#exited(self, description, stderr),
          },
        ),
    );
    // Restore prepared components before any invocation reaches this worker: messages are handled
    // in order, and the worker awaits a component's load before using it. Those loaded on use
    // that no one invoked yet only where the predecessor held them.
    for (const [id, compiled] of this.#components) if (!compiled.loadOnUse || compiled.spread || held.has(id)) this.#sendLoad(handle, id);
    return handle;
  }

  #exited(handle: WorkerHandle, description: string, stderr: string): void {
    handle.gone = true;
    handle.exited.resolve();
    if (handle.state === "dead") {
      this.#settleLost(handle);
      return;
    }
    if (!handle.readyOnce) {
      // It never started: say why, with what it wrote (bubblewrap explains itself there).
      const said = stderr.trim().split("\n").slice(-3).join(" | ");
      handle.ready.reject(new Error(`a worker process ${description}${said ? `: ${said}` : ""}`));
    }
    this.#retire(handle, `the worker process ${description} during the invocation; it may or may not have taken effect`, true);
  }

  /**
   * Settles what was in flight on a worker that is gone. An invocation whose number is not in its
   * start register did not run (the worker writes it there, synchronously, before the guest runs):
   * a definite outcome.
   */
  #settleLost(handle: WorkerHandle): void {
    const started = handle.process.started();
    for (const flight of [...handle.flights]) {
      if (!started.has(flight.n)) this.#settle(flight, failure("unavailable", "the worker stopped before the invocation started; it did not run"), 0);
      else if (flight.overran) this.#settle(flight, failure("timeout", "the invocation passed its deadline and its worker was stopped"));
      else this.#settle(flight, { outcome: "unknown", message: handle.lostReason });
    }
  }

  #lease(handle: WorkerHandle, request: LeaseRequest): number {
    const flight = this.#flights.get(request.invocation);
    if (!flight || flight.handle !== handle || flight.workspace === undefined) return 0;
    const granted = this.#quotas.grant(flight.workspace, request.bytes);
    flight.leased += granted;
    return granted;
  }

  #onMessage(handle: WorkerHandle, message: FromWorker): void {
    switch (message.type) {
      case "ready":
        if (handle.state === "starting") handle.state = "ready";
        handle.readyOnce = true;
        this.#bootFailures[handle.index] = 0;
        handle.ready.resolve();
        // A replacement brings its slots back: invocations waiting for one may start.
        this.#drain("tool");
        this.#drain("loop");
        break;
      case "loaded": {
        const load = handle.loads.get(message.component);
        // None: a load that unloading the component cancelled. (An answer the worker sent before it
        // saw the unload may settle a newer load of the id early: harmless, as the worker handles
        // invocations after that load in order and awaits it.)
        if (!load) break;
        if (message.error !== undefined) {
          handle.loads.delete(message.component);
          load.reject(new Error(message.error));
        } else {
          handle.loaded.add(message.component);
          load.resolve();
        }
        break;
      }
      case "receipt": {
        const timer = this.#unacknowledged.get(message.invocation);
        if (timer) {
          clearTimeout(timer);
          this.#unacknowledged.delete(message.invocation);
        }
        const flight = this.#flights.get(message.invocation);
        if (flight && flight.handle === handle) {
          flight.emitsDropped += Math.max(0, Math.floor(Number(message.emitsDropped) || 0));
          this.#settle(flight, fromWorker(message.receipt), message.workspaceGrowth);
        }
        break;
      }
      case "host-call":
        this.#hostCall(handle, message);
        break;
      case "report": {
        const { spares, memories, loaded, rssBytes, typeStripper } = message;
        handle.reports.shift()?.resolve({ spares, memories, loaded, rssBytes, typeStripper });
        break;
      }
      case "emit": {
        const flight = this.#flights.get(message.invocation);
        // The worker drops what is past the limits already; a worker that did not is not believed.
        if (!flight?.host || flight.answered || flight.handle !== handle) break;
        if (flight.emits >= this.#options.maxEmits || Buffer.byteLength(message.payload) > this.#options.maxEmitBytes) flight.emitsDropped++;
        else {
          flight.emits++;
          try {
            flight.host.emit(message.payload);
          } catch {
            // best effort (wit/env.wit)
          }
        }
        break;
      }
    }
  }

  #hostCall(handle: WorkerHandle, message: Extract<FromWorker, { type: "host-call" }>): void {
    const flight = this.#flights.get(message.invocation);
    if (!flight || flight.handle !== handle || flight.answered) return;
    const host = flight.host;
    const reply = (result: { ok: true; value: string } | { ok: false; error: FailureBody }) => {
      if (flight.answered || handle.state === "dead") return;
      this.#post(handle, { type: "host-result", invocation: message.invocation, call: message.call, ...result });
    };
    if (!host) {
      reply({ ok: false, error: { code: "host_unavailable", message: "this invocation has no host services" } });
      return;
    }
    let pending: Promise<string>;
    try {
      pending = Promise.resolve(message.op === "callModel" ? host.callModel(message.payload) : host.dispatchTools(message.payload));
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        if (typeof value === "string") reply({ ok: true, value });
        else reply({ ok: false, error: { code: "invalid_host_response", message: `the host's ${message.op} returned ${typeof value}, not a string` } });
      },
      (error: unknown) => reply({ ok: false, error: hostFailure(error) }),
    );
  }

  #post(handle: WorkerHandle, message: ToWorker): void {
    if (handle.state === "dead") return;
    handle.process.send(message);
  }
}

function normalize(options: PoolOptions): Required<PoolOptions> {
  const positive = (name: keyof PoolOptions, value: number | undefined) => {
    if (!Number.isInteger(value) || (value as number) < 1) throw new RangeError(`PoolOptions.${name} must be a positive integer, got ${value}`);
    return value as number;
  };
  return {
    workers: positive("workers", options.workers),
    sandbox: options.sandbox ?? POOL_DEFAULTS.sandbox,
    dataDir: options.dataDir,
    workspaceRoot: path.resolve(options.workspaceRoot ?? join(options.dataDir, "workspaces")),
    workspaceQuotaBytes: Math.max(0, options.workspaceQuotaBytes ?? POOL_DEFAULTS.workspaceQuotaBytes),
    scratchQuotaBytes: Math.max(0, options.scratchQuotaBytes ?? POOL_DEFAULTS.scratchQuotaBytes),
    maxOpenFiles: positive("maxOpenFiles", options.maxOpenFiles ?? POOL_DEFAULTS.maxOpenFiles),
    maxEmits: Math.max(0, Math.floor(options.maxEmits ?? POOL_DEFAULTS.maxEmits)),
    maxEmitBytes: positive("maxEmitBytes", options.maxEmitBytes ?? POOL_DEFAULTS.maxEmitBytes),
    fuel: positive("fuel", options.fuel),
    memoryMib: positive("memoryMib", options.memoryMib),
    maxTurnSecs: positive("maxTurnSecs", options.maxTurnSecs),
    agentLoopSlotsPerWorker: positive("agentLoopSlotsPerWorker", options.agentLoopSlotsPerWorker),
    toolSlotsPerWorker: positive("toolSlotsPerWorker", options.toolSlotsPerWorker),
    workspaceToolSlots: positive("workspaceToolSlots", options.workspaceToolSlots ?? options.workers * options.toolSlotsPerWorker),
    workspaceAgentLoopSlots: positive("workspaceAgentLoopSlots", options.workspaceAgentLoopSlots ?? options.workers * options.agentLoopSlotsPerWorker),
    workspaceWorkers: Math.min(options.workers, positive("workspaceWorkers", options.workspaceWorkers ?? options.workers)),
    queueLength: Math.max(0, Math.floor(options.queueLength ?? POOL_DEFAULTS.queueLength)),
    spareInstances: Math.max(0, Math.floor(options.spareInstances ?? POOL_DEFAULTS.spareInstances)),
    spareMemoryMib: Math.max(0, options.spareMemoryMib ?? POOL_DEFAULTS.spareMemoryMib),
    compiledMemoryMib: Math.max(0, options.compiledMemoryMib ?? POOL_DEFAULTS.compiledMemoryMib),
    loadOnUseMib: Math.max(0, options.loadOnUseMib ?? POOL_DEFAULTS.loadOnUseMib),
  };
}

/**
 * `<dataDir>/invocations/<pid>-<random>/`: this pool's directory, holding one directory per
 * worker process (its invocations' /scratch). Directories left by pools of processes that no
 * longer exist (a crash, kill -9) are removed first.
 */
async function runtimeDirectory(dataDir: string): Promise<string> {
  const parent = join(dataDir, "invocations");
  await mkdir(parent, { recursive: true, mode: 0o700 });
  for (const entry of await readdir(parent)) {
    const pid = Number(entry.split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processAlive(pid)) {
      await rm(join(parent, entry), { recursive: true, force: true });
    }
  }
  const dir = join(parent, `${process.pid}-${randomBytes(4).toString("hex")}`);
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Invocations in flight on the worker whose guest started. */
function runningOn(handle: WorkerHandle): number {
  if (handle.flights.size === 0) return 0;
  const started = handle.process.started();
  let running = 0;
  for (const flight of handle.flights) if (started.has(flight.n)) running++;
  return running;
}

function lexicallyLess(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}

/** Why an invocation cannot be sent at all, if it cannot; nothing runs then. */
function refusal(invocation: Invocation, compiled: Compiled, workspaceRoot: string): FailureBody | undefined {
  const { entrypoint } = invocation;
  if (!compiled.prepared.manifest.entrypoints.includes(entrypoint)) {
    return { code: "invalid_argument", message: `component ${invocation.component.id} does not export ${entrypoint}` };
  }
  if (entrypoint === "turn" && !invocation.host) return { code: "invalid_argument", message: "an agent-loop turn needs host services" };
  if (invocation.grants.filesystem.workspace) {
    if (invocation.workspaceDir === undefined) return { code: "invalid_argument", message: "a workspace grant needs the invocation's workspaceDir" };
    // The only host directory a worker can write is the workspace root (docs/environments.md).
    const relative = path.relative(workspaceRoot, path.resolve(invocation.workspaceDir));
    if (relative === "" || relative.startsWith("..") || path.isAbsolute(relative)) {
      return { code: "invalid_argument", message: "the invocation's workspaceDir is not below the pool's workspace root" };
    }
  }
  return undefined;
}

function failure(code: string, message: string): Outcome {
  return { outcome: "failure", code, message };
}

function fromWorker(receipt: WorkerReceipt): Outcome {
  return receipt;
}

function done(started: number, outcome: Outcome): Receipt {
  return { ...outcome, durationMs: Math.round((performance.now() - started) * 1000) / 1000 } as Receipt;
}

function messageOf(error: unknown): string {
  if (error instanceof ConnectError) return error.rawMessage;
  return error instanceof Error ? error.message : String(error);
}

/**
 * What the guest sees of a failed host call: a caller's {code, message} as is, a service error
 * by its stable code, anything else as `internal` with no details (host internals stay out of
 * guests).
 */
function hostFailure(error: unknown): FailureBody {
  if (!(error instanceof Error) && typeof error === "object" && error !== null) {
    const { code, message } = error as Record<string, unknown>;
    if (typeof code === "string" && typeof message === "string") return { code, message };
  }
  const { body } = describeError(error);
  return { code: body.code, message: body.message };
}
