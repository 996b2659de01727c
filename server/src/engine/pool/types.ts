import type { ServiceGrants } from "../grants.ts";
import type { ComponentRef } from "../preparation/index.ts";

export type { ComponentRef, ServiceGrants };

/**
 * Where granted secrets' values are read, by name, when an invocation is dispatched (the
 * server's process environment for the service environment). Only the granted names are read.
 */
export type SecretSource = Readonly<Record<string, string | undefined>>;

export interface PoolOptions {
  /** Worker processes (SERVICE_ENV_WORKERS). */
  workers: number;
  /**
   * Whether each worker process runs inside a bubblewrap sandbox (SERVICE_ENV_SANDBOX). Default
   * true; without one, guests are contained by the engine's own checks only (docs/operations.md).
   */
  sandbox?: boolean;
  /** Prepared components live under `<dataDir>/prepared/`, the workers' directories under `<dataDir>/invocations/`. */
  dataDir: string;
  /**
   * The parent of every binding's /workspace (SERVICE_ENV_WORKSPACE_ROOT): the one host directory
   * a sandboxed worker may write besides its own. Default `<dataDir>/workspaces`.
   */
  workspaceRoot?: string;
  /** Disk quota of each binding's /workspace, in bytes (SERVICE_ENV_WORKSPACE_QUOTA_MIB); 0: none. Default 1 GiB. */
  workspaceQuotaBytes?: number;
  /** Disk quota of each invocation's /scratch, in bytes (SERVICE_ENV_SCRATCH_QUOTA_MIB). Default 256 MiB. */
  scratchQuotaBytes?: number;
  /** Descriptors and streams one invocation may hold open at once. Default 256. */
  maxOpenFiles?: number;
  /**
   * Progress events (`emit`) one agent-loop invocation may send, and the largest one: past them
   * they are dropped inside its worker, before they cost the pool anything. Default 100 and 16 KiB.
   */
  maxEmits?: number;
  maxEmitBytes?: number;
  /** Default fuel per invocation. */
  fuel: number;
  /** Cap on the memories and tables of each guest instance. */
  memoryMib: number;
  /** Bound on any one invocation (SERVICE_MAX_TURN_SECS), on top of its own deadline. */
  maxTurnSecs: number;
  /** Concurrent agent-loop ("turn") invocations per worker. */
  agentLoopSlotsPerWorker: number;
  /** Concurrent leaf ("run") invocations per worker. */
  toolSlotsPerWorker: number;
  /**
   * Tool slots one workspace may hold at once, over the whole pool
   * (SERVICE_ENV_WORKSPACE_TOOL_SLOTS, whose default is half the pool's). Default: all of them.
   */
  workspaceToolSlots?: number;
  /** Agent-loop slots one workspace may hold at once (SERVICE_ENV_WORKSPACE_AGENT_LOOP_SLOTS). Default: all of them. */
  workspaceAgentLoopSlots?: number;
  /**
   * Workers one workspace's invocations may occupy at once (SERVICE_ENV_WORKSPACE_WORKERS, whose
   * default is half of them): a workspace whose guests compute without end holds at most these
   * workers' threads, and the others serve the other workspaces. Default: all of them.
   */
  workspaceWorkers?: number;
  /**
   * Invocations of one kind one workspace may have waiting for a slot (SERVICE_ENV_QUEUE_LENGTH);
   * past it, `pool_saturated` at once. 0: none wait. Default 64.
   */
  queueLength?: number;
  /**
   * Fresh instances kept ready per recently used component per worker (each used once); 0
   * disables instantiating ahead of demand. Default 2.
   */
  spareInstances?: number;
  /** Guest memory the spare instances of one worker may hold, in MiB. Default 256. */
  spareMemoryMib?: number;
  /**
   * Budget for compiled components, counted as the bytes of their core modules, in MiB: past it
   * the least recently used idle ones are unloaded (and reloaded from their prepared files when
   * next invoked). Default 0: unbounded, prepared code stays for the pool's lifetime.
   */
  compiledMemoryMib?: number;
  /**
   * Components whose core modules are larger than this, in MiB, are loaded on one worker when
   * prepared, and on every worker once invoked: each worker holds its own copy of a component's
   * code (V8 cannot share it between processes), so a prepared component nobody calls costs one
   * copy, not one per worker. Smaller ones load on every worker when prepared. Default 1 (the
   * JavaScript runtimes load on use, hand-written components everywhere); 0: every component.
   */
  loadOnUseMib?: number;
}

/** Host services of an agent loop, supplied by the caller (model calls, nested tool dispatch). */
export interface HostServices {
  callModel(request: string): Promise<string>;
  dispatchTools(calls: string): Promise<string>;
  emit(event: string): void;
  /** How many of the loop's emits the pool dropped past its limits (maxEmits, maxEmitBytes), told once, at its end. */
  dropped?(count: number): void;
}

export interface Invocation {
  component: ComponentRef;
  /** The workspace it runs for: slots are shared out between workspaces. Default "" (one for all). */
  tenant?: string;
  entrypoint: "run" | "turn";
  input: string;
  configuration: string;
  /** Absolute Unix time in milliseconds. */
  deadlineMs: number;
  /** Already authorized against the deployment allow-lists: names and modes, never values. */
  grants: ServiceGrants;
  /** The host directory mapped to /workspace; required when the grant has a workspace. */
  workspaceDir?: string;
  /**
   * Where the granted secrets' values are read at dispatch; required when the grant names
   * secrets. A granted secret without a value there fails the invocation `secret_unavailable`
   * before anything is sent.
   */
  secretSource?: SecretSource;
  /** Required for "turn". */
  host?: HostServices;
  /** The component is a program runtime: it gets {"source","configuration"} as its configuration. */
  program?: { source: string };
  /** Default PoolOptions.fuel. */
  fuel?: number;
  /**
   * Aborting cancels the invocation: one not started yet never starts, one waiting (on the host,
   * a timer, I/O) ends `cancelled` at once; a guest computing on its thread runs on until it ends
   * or reaches its deadline (stopping it would take down the other guests of its worker).
   */
  signal?: AbortSignal;
}

/** What an invocation ran: a tool's `run`, a program's, or an agent loop's `turn`. */
export type InvocationKind = "tool" | "program" | "agent_loop";

/** Told of each invocation once it has its receipt. */
export type InvocationObserver = (invocation: { kind: InvocationKind; receipt: Receipt }) => void;

export type Receipt =
  | { outcome: "returned"; output: string; fuelUsed: number; durationMs: number }
  | { outcome: "failure"; code: string; message: string; fuelUsed?: number; durationMs: number }
  | { outcome: "unknown"; message: string; durationMs: number };

export interface WorkerStats {
  index: number;
  /** The worker's process id as the host sees it (its sandbox's outermost process), once started. */
  pid: number | undefined;
  state: "starting" | "ready" | "dead";
  /** A guest has held its thread for a while (it computes): new work goes to other workers while it can. */
  busy: boolean;
  tools: number;
  agentLoops: number;
  /**
   * Of its tools and agent loops, those its worker said it started (their guests run): killed now,
   * they end `unknown`; the others, sent but not yet started, end `unavailable`.
   */
  running: number;
  /** Components loaded on this worker. */
  loaded: number;
}

export interface PoolStats {
  workers: WorkerStats[];
  /** Components prepared and kept compiled on the workers. */
  prepared: number;
  /** Transpiles done by this process (restarts reuse prepared files and do none). */
  transpiles: number;
  /** Preparations satisfied from `<dataDir>/prepared/`. */
  preparedFromDisk: number;
  /** Core module bytes of the compiled components (what compiledMemoryMib bounds). */
  compiledBytes: number;
  /** Components unloaded to keep within compiledMemoryMib. */
  unloads: number;
  /** Workers replaced after a crash or a deadline kill. */
  replacements: number;
  inFlight: { tools: number; agentLoops: number };
  /** Invocations waiting for a slot, over every workspace. */
  waiting: { tools: number; agentLoops: number };
  capacity: { tools: number; agentLoops: number };
}

/** One workspace's part of the pool (Pool.workspaceLoad), by kind. */
export interface WorkspaceLoad {
  /** Slots counted against its share. */
  inFlight: { tools: number; agentLoops: number };
  /** Its invocations waiting for a slot. */
  waiting: { tools: number; agentLoops: number };
}

/** What a worker process reports of itself (Pool.report). */
export interface WorkerReport {
  /** Its spare instances: waiting now, the guest memory they hold, instantiated over its life. */
  spares: { instances: number; bytes: number; instantiated: number };
  /** Its recycled guest memories: made, reused (zeroed) and dropped, over its life. */
  memories: { made: number; reused: number; dropped: number };
  /** Components loaded on it. */
  loaded: number;
  /** Its resident memory. */
  rssBytes: number;
  /**
   * Whether it loaded Node's TypeScript stripper: only if some of its own code was not in the
   * compile cache (compile-cache.ts), at a cost of about 11.5 MiB.
   */
  typeStripper: boolean;
}
