// Guest instances inside a worker: instantiating a prepared component with its per-instance fuel
// counter and imports, keeping a few fresh instances ready ahead of demand, giving small memories
// back zeroed for the next instance, and turning how a call ended into a receipt.
import { cappedMaximum } from "../fuel/capped-export.ts";
import { FUEL_IMPORT, RECYCLED_MEMORY } from "../fuel/import.ts";
import type { MemoryLimits } from "../fuel/memory-import.ts";
// The contract alone: the world's index also brings in the service's error types (Connect,
// protobuf), about 24 MB of every worker's heap for nothing a worker uses.
import { HOST_INTERFACE, unversioned, WASI_INTERFACES, type Entrypoint } from "../component/contract.ts";
import { missingImports } from "./imports.ts";
import type { ComponentFacts, FailureBody, MemoryStats, WorkerReceipt } from "../pool/protocol.ts";
import { GuestExit, wasiImports, type WasiContext } from "../wasi/world.ts";
import { PAGE_BYTES } from "../wasm/index.ts";

type CoreImports = Record<string, Record<string, unknown>>;
type InstantiateCore = (module: WebAssembly.Module, imports?: CoreImports) => WebAssembly.Instance;
type Instantiate = (getCoreModule: (name: string) => WebAssembly.Module, imports: Record<string, unknown>, instantiateCore: InstantiateCore) => unknown;
type Exports = Record<string, (...args: unknown[]) => unknown>;

/** A prepared component loaded in this worker: its glue and its compiled core modules. */
export interface LoadedComponent {
  id: string;
  instantiate: Instantiate;
  modules: Map<string, WebAssembly.Module>;
  entrypoints: Entrypoint[];
  usesHost: boolean;
  usesWasi: boolean;
  /** Fresh instances waiting for an invocation; each is used once. */
  spares: GuestInstance[];
  /** Guest memory of a fresh instance: its declared minimum until one was measured. */
  spareBytes: number;
  lastUsed: number;
  refillScheduled: boolean;
  /** The core modules whose memory is recycled (their RECYCLED_MEMORY import), with their free memories. */
  recycled: Map<WebAssembly.Module, RecycledMemories>;
  recycling: Recycling;
}

/** The worker's account of recycled memories, over all its components. */
export interface Recycling {
  stats: MemoryStats;
  /** Bytes the free memories hold now. */
  freeBytes: number;
}

/** Free memories kept per core module: enough for a spare and the call in flight. */
const FREE_MEMORIES = 2;
/** Bytes a worker keeps in free memories, over all its components (two StarlingMonkey memories and some). */
const FREE_MEMORY_BYTES = 32 * 1024 * 1024;

export function newRecycling(): Recycling {
  return { stats: { made: 0, reused: 0, dropped: 0 }, freeBytes: 0 };
}

/**
 * The memories of one core module's instances, given back zeroed and never grown (so each is
 * exactly what a fresh memory of the module's limits would be) by instances whose guest can no
 * longer run (recycleMemories).
 */
interface RecycledMemories {
  limits: MemoryLimits;
  free: WebAssembly.Memory[];
  /** Its component was unloaded: what its instances still running give back is dropped. */
  released: boolean;
}

/** What an instance's imports reach while it serves an invocation. */
export interface Scope extends WasiContext {
  hostCall(op: "callModel" | "dispatchTools", payload: string): Promise<string>;
  emit(payload: string): void;
}

/** The mutable link from an instance's imports to the invocation it serves. */
export interface Binding {
  scope?: Scope;
}

/** A memory or table whose maximum the memory cap set at preparation, with that maximum (pages or entries). */
export interface Capped {
  object: WebAssembly.Memory | WebAssembly.Table;
  maximum: number;
}

export interface GuestInstance {
  exports: Exports;
  fuel: WebAssembly.Global;
  /** Fuel the start-up code consumed (metered like everything else). */
  startupFuel: bigint;
  /** The memories its core instances export, each once. */
  memories: WebAssembly.Memory[];
  /** Its memories and tables that the memory cap limits, exported under reserved names (fuel/capped-export.ts). */
  capped: Capped[];
  /** The recycled memories it was given, each to go back to its module's free memories. */
  recycled: { memory: WebAssembly.Memory; to: RecycledMemories }[];
  binding: Binding;
}

/** What classify reads of an instance: also all there is of one whose instantiation threw. */
type Observed = Pick<GuestInstance, "fuel" | "capped">;

/**
 * The fuel counter and capped memories and tables of instantiations that threw, by the error
 * thrown. Start functions run inside instantiation, before there is an instance to read the
 * counter from, so a start-up fuel trap would otherwise look like any other trap.
 */
const unfinished = new WeakMap<object, Observed>();

const HOST_NAMESPACE = unversioned(HOST_INTERFACE);

/**
 * A prepared component ready to instantiate. Fails when the worker's imports lack a function or
 * resource the component takes from them (every instantiation would fail).
 */
export function loadComponent(
  id: string,
  glue: { instantiate?: unknown },
  modules: [string, WebAssembly.Module][],
  facts: ComponentFacts,
  recycled: ReadonlyMap<WebAssembly.Module, MemoryLimits>,
  recycling: Recycling,
): LoadedComponent {
  if (typeof glue.instantiate !== "function") throw new Error("the prepared glue exports no instantiate function");
  const missing = missingImports(facts.imports, guestImports({}, { wasi: true, host: true }));
  if (missing.length > 0) throw new Error(`the component imports ${missing.join(", ")}, which the service environment does not provide`);
  return {
    id,
    instantiate: glue.instantiate as Instantiate,
    modules: new Map(modules),
    entrypoints: facts.entrypoints,
    usesHost: facts.imports.some((item) => unversioned(item.name) === HOST_NAMESPACE),
    usesWasi: facts.imports.some((item) => (WASI_INTERFACES as readonly string[]).includes(unversioned(item.name))),
    spares: [],
    spareBytes: facts.initialMemoryBytes,
    lastUsed: 0,
    refillScheduled: false,
    recycled: new Map([...recycled].map(([module, limits]) => [module, { limits, free: [], released: false }])),
    recycling,
  };
}

const NO_HOST: FailureBody = { code: "host_unavailable", message: "no host services are bound to this invocation" };

/** The imports of one instance, keyed as jco's glue looks them up; calls reach `binding.scope`. */
function guestImports(binding: Binding, uses: { wasi: boolean; host: boolean }): Record<string, unknown> {
  const imports: Record<string, unknown> = uses.wasi ? wasiImports(() => binding.scope) : {};
  if (uses.host) {
    imports[HOST_NAMESPACE] = {
      callModel: (request: string) => (binding.scope ? binding.scope.hostCall("callModel", request) : Promise.reject(NO_HOST)),
      dispatchTools: (calls: string) => (binding.scope ? binding.scope.hostCall("dispatchTools", calls) : Promise.reject(NO_HOST)),
      emit: (event: string) => binding.scope?.emit(event),
    };
  }
  return imports;
}

/**
 * A fresh instance: new fuel counter (imported by every core module), new imports, new memories
 * (a recycled one, zeroed, where the module imports it). Returns synchronously when the glue does
 * (it does for compiled modules), else a promise.
 */
export function instantiate(component: LoadedComponent, budget: bigint, binding: Binding): GuestInstance | Promise<GuestInstance> {
  const fuel = new WebAssembly.Global({ value: "i64", mutable: true }, budget);
  const memories: WebAssembly.Memory[] = [];
  const capped: Capped[] = [];
  const recycled: GuestInstance["recycled"] = [];
  const fuelImport = { [FUEL_IMPORT.name]: fuel };
  const instantiateCore: InstantiateCore = (module, imports) => {
    const own: CoreImports = { ...imports, [FUEL_IMPORT.module]: fuelImport };
    const to = component.recycled.get(module);
    if (to) {
      const memory = freeMemory(component, to);
      recycled.push({ memory, to });
      own[RECYCLED_MEMORY.module] = { [RECYCLED_MEMORY.name]: memory };
    }
    const instance = new WebAssembly.Instance(module, own as WebAssembly.Imports);
    for (const [name, value] of Object.entries(instance.exports)) {
      // A capped memory is exported twice when the glue needs it too.
      if (value instanceof WebAssembly.Memory && !memories.includes(value)) memories.push(value);
      const maximum = cappedMaximum(name);
      if (maximum !== undefined && (value instanceof WebAssembly.Memory || value instanceof WebAssembly.Table)) capped.push({ object: value, maximum });
    }
    return instance;
  };
  const imports = guestImports(binding, { wasi: component.usesWasi, host: component.usesHost });
  const finish = (exports: unknown): GuestInstance => ({
    exports: exports as Exports,
    fuel,
    startupFuel: budget - (fuel.value as bigint),
    memories,
    capped,
    recycled,
    binding,
  });
  const fail = (error: unknown): never => {
    if (typeof error === "object" && error !== null) unfinished.set(error, { fuel, capped });
    throw error;
  };
  let result: unknown;
  try {
    result = component.instantiate((name) => moduleNamed(component, name), imports, instantiateCore);
  } catch (error) {
    fail(error);
  }
  return result instanceof Promise ? result.then(finish, fail) : finish(result);
}

/** A free memory of the module's, or a new one when none is. */
function freeMemory(component: LoadedComponent, from: RecycledMemories): WebAssembly.Memory {
  const memory = from.free.pop();
  if (memory) {
    component.recycling.stats.reused++;
    component.recycling.freeBytes -= memory.buffer.byteLength;
    return memory;
  }
  component.recycling.stats.made++;
  return new WebAssembly.Memory(from.limits);
}

/**
 * Gives an instance's recycled memories back, zeroed. Only once its guest can no longer run: its
 * export has returned or thrown (with JSPI, its one stack is gone: an invocation ended by its
 * deadline or a cancellation first unwinds a suspended guest, Invocation.finish), or it was never
 * called. A memory that grew is dropped (a fresh instance must see the module's initial size), as
 * is one past the few kept free (per module, and in bytes per worker), and one of a component
 * unloaded meanwhile.
 */
export function recycleMemories(component: LoadedComponent, instance: GuestInstance): void {
  const { recycling } = component;
  for (const { memory, to } of instance.recycled.splice(0)) {
    const bytes = memory.buffer.byteLength;
    if (to.released || bytes !== to.limits.initial * PAGE_BYTES || to.free.length >= FREE_MEMORIES || recycling.freeBytes + bytes > FREE_MEMORY_BYTES) {
      recycling.stats.dropped++;
      continue;
    }
    new Uint8Array(memory.buffer).fill(0);
    to.free.push(memory);
    recycling.freeBytes += bytes;
  }
}

/** Lets go of a component's free memories (it was unloaded), and of those its running instances would give back. */
export function releaseMemories(component: LoadedComponent): void {
  for (const recycled of component.recycled.values()) {
    recycled.released = true;
    for (const memory of recycled.free.splice(0)) component.recycling.freeBytes -= memory.buffer.byteLength;
  }
}

function moduleNamed(component: LoadedComponent, name: string): WebAssembly.Module {
  const module = component.modules.get(name);
  if (!module) throw new Error(`the glue asked for core module ${name}, which preparation did not produce`);
  return module;
}

/** Guest memory an instance holds (what a spare costs while it waits). */
export function memoryBytes(instance: GuestInstance): number {
  return instance.memories.reduce((sum, memory) => sum + memory.buffer.byteLength, 0);
}

/**
 * Keeps up to `depth` fresh instances per recently used component (one this worker invoked),
 * within a memory budget shared by the worker, instantiated when the worker is idle. A spare is instantiated only when its memory fits beside the spares
 * already held, after dropping those of less recently used components if need be; the spares of
 * the component itself and of more recently used ones are never dropped to make room, so
 * refilling stops instead of cycling. A spare is instantiated with `spareFuel`; its start-up
 * consumption is charged to the invocation that takes it, so fuel accounting is the same as
 * instantiating on demand.
 */
export class Spares {
  readonly #depth: number;
  readonly #budgetBytes: number;
  readonly #spareFuel: bigint;
  readonly #components: Map<string, LoadedComponent>;
  /** Spares instantiated over the worker's life (for tests: refilling must converge). */
  instantiated = 0;

  constructor(depth: number, budgetBytes: number, spareFuel: bigint, components: Map<string, LoadedComponent>) {
    this.#depth = depth;
    this.#budgetBytes = budgetBytes;
    this.#spareFuel = spareFuel;
    this.#components = components;
  }

  /** A spare bound to `scope` with `budget` fuel left after its start-up, or undefined. */
  take(component: LoadedComponent, scope: Scope, budget: bigint): GuestInstance | "exhausted" | undefined {
    const spare = component.spares.pop();
    if (!spare) return undefined;
    if (spare.startupFuel > budget) return "exhausted";
    spare.binding.scope = scope;
    spare.fuel.value = budget - spare.startupFuel;
    return spare;
  }

  /** Tops the component's spares up when the worker is next idle. */
  schedule(component: LoadedComponent): void {
    component.lastUsed = performance.now();
    this.#scheduleRefill(component);
  }

  /** Guest memory the spares of this worker hold. */
  heldBytes(): number {
    let total = 0;
    for (const component of this.#components.values()) for (const spare of component.spares) total += memoryBytes(spare);
    return total;
  }

  #scheduleRefill(component: LoadedComponent): void {
    if (this.#depth === 0 || component.refillScheduled || component.spares.length >= this.#depth) return;
    component.refillScheduled = true;
    setImmediate(() => this.#refill(component));
  }

  /** Adds one spare if it fits; one per turn of the event loop, so queued invocations go first. */
  #refill(component: LoadedComponent): void {
    component.refillScheduled = false;
    if (this.#components.get(component.id) !== component || component.spares.length >= this.#depth) return;
    if (!this.#makeRoom(component, component.spareBytes)) return;
    let spare: GuestInstance;
    try {
      const made = instantiate(component, this.#spareFuel, {});
      if (made instanceof Promise) {
        // An asynchronous glue: instantiate on demand instead.
        made.catch(() => undefined);
        return;
      }
      spare = made;
    } catch {
      // Start-up trapped (fuel, memory): on-demand instantiation will report it properly.
      return;
    }
    this.instantiated++;
    // Start-up code may have grown memory beyond the declared minimum: the next estimate is exact.
    component.spareBytes = memoryBytes(spare);
    if (this.heldBytes() + component.spareBytes > this.#budgetBytes) return;
    component.spares.push(spare);
    this.#scheduleRefill(component);
  }

  /**
   * Whether `bytes` more fit in the budget, dropping spares of components used less recently than
   * `component` (least recent first) until they do. Nothing is dropped when they cannot fit.
   */
  #makeRoom(component: LoadedComponent, bytes: number): boolean {
    const older = [...this.#components.values()].filter((other) => other !== component && other.lastUsed < component.lastUsed && other.spares.length > 0);
    const held = this.heldBytes();
    const droppable = older.reduce((sum, other) => sum + other.spares.reduce((bytesOf, spare) => bytesOf + memoryBytes(spare), 0), 0);
    if (held - droppable + bytes > this.#budgetBytes) return false;
    let total = held;
    for (const other of older.sort((a, b) => a.lastUsed - b.lastUsed)) {
      while (other.spares.length > 0 && total + bytes > this.#budgetBytes) total -= memoryBytes(other.spares.shift()!);
    }
    return true;
  }
}

/** A failure as the guest wrote it: ComponentError carries the failure record as its payload. */
function guestFailure(error: unknown): FailureBody | undefined {
  const payload = (error as { payload?: unknown } | null)?.payload;
  if (typeof payload !== "object" || payload === null) return undefined;
  const { code, message } = payload as Record<string, unknown>;
  return typeof code === "string" && typeof message === "string" ? { code, message } : undefined;
}

/**
 * How a call that threw ended. Fuel first: a trap with the counter below zero is exhaustion
 * (the counter is stale, i.e. too high, for any other trap). Then a trap with a memory or table
 * at its cap is memory exhaustion: the guest found memory.grow or table.grow failing and gave up.
 * Everything else that is not the guest's own err(failure) is a trap. Without an instance, the
 * error is looked up among instantiations that threw (a trap in start-up code).
 */
export function classify(error: unknown, instance: Observed | undefined, budget: bigint, memoryPages: number): WorkerReceipt {
  const starting = instance === undefined && typeof error === "object" && error !== null ? unfinished.get(error) : undefined;
  instance ??= starting;
  const remaining = instance ? (instance.fuel.value as bigint) : budget;
  const fuelUsed = Number(budget - (remaining < 0n ? 0n : remaining));
  if (remaining < 0n) {
    return {
      outcome: "failure",
      code: "fuel_exhausted",
      message: `the guest used up its fuel (${budget} units)${starting ? " while starting" : ""}`,
      fuelUsed: Number(budget),
    };
  }
  const failure = guestFailure(error);
  if (failure) return { outcome: "failure", code: failure.code, message: failure.message, fuelUsed };
  if (error instanceof GuestExit) return { outcome: "failure", code: "guest_trap", message: error.message, fuelUsed };
  const message = error instanceof Error ? error.message : String(error);
  const atCap = instance?.capped.some(isAtCap) ?? false;
  if ((error instanceof WebAssembly.RuntimeError && atCap) || (error instanceof RangeError && /out of memory|memory size|allocate/i.test(message))) {
    const mib = (memoryPages * PAGE_BYTES) / (1024 * 1024);
    return {
      outcome: "failure",
      code: "memory_exhausted",
      message: `the guest reached its memory cap (${mib} MiB for its memories and tables): ${message}`,
      fuelUsed,
    };
  }
  if (error instanceof RangeError && /call stack/i.test(message)) {
    return { outcome: "failure", code: "guest_trap", message: `the guest overflowed its stack: ${message}`, fuelUsed };
  }
  return { outcome: "failure", code: "guest_trap", message: `the guest trapped: ${message}`, fuelUsed };
}

/**
 * One rule for memories and tables: at its cap when it holds fifteen sixteenths of the maximum
 * the cap gave it, or more. An allocator asking for a large block fails short of the maximum; a
 * growth that fails earlier than that is the guest's business.
 */
function isAtCap({ object, maximum }: Capped): boolean {
  const size = object instanceof WebAssembly.Memory ? object.buffer.byteLength / PAGE_BYTES : object.length;
  return 16 * size >= 15 * maximum;
}
