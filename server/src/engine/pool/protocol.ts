// Messages between the pool (in the server) and its worker processes, over each worker's IPC
// channel (Node's, with structured-clone serialization: no functions, no classes). Each message
// is named by what it asks or tells; `invocation` is the pool's number for one invocation.
import type { Entrypoint, ImportedInterface } from "../component/index.ts";
import type { ServiceGrants } from "../grants.ts";

/** What a worker process is told at start, in its environment (SKILLENV_WORKER, JSON). */
export interface WorkerBoot {
  /** Cap of each guest memory, in 64 KiB pages (to recognise memory exhaustion). */
  memoryPages: number;
  /** Fuel given to a spare instance at start-up (only start-up code runs on it). */
  spareFuel: number;
  spareInstances: number;
  spareMemoryBytes: number;
  /** Where this worker makes each invocation's /scratch (its own directory, removed with it). */
  scratchRoot: string;
  /** How long past a computing guest's deadline the watchdog waits before it stops the process. */
  deadlineGraceMs: number;
  /** Open descriptors and streams one invocation may hold at once. */
  maxOpenFiles: number;
  /** Progress events one invocation may emit, and the largest one; more or larger ones are dropped. */
  maxEmits: number;
  maxEmitBytes: number;
  /** The nice value of the thread guests run on (raised after the watchdog's thread started). */
  niceness: number;
}

/** What a worker needs to know about a prepared component, from its manifest. */
export interface ComponentFacts {
  entrypoints: Entrypoint[];
  imports: ImportedInterface[];
  /** Guest memory a fresh instance starts with: the minimums of the memories its core modules define. */
  initialMemoryBytes: number;
}

/** The spare instances of a worker, as it reports them. */
export interface SpareStats {
  /** Spares waiting now, over every component. */
  instances: number;
  /** Guest memory they hold. */
  bytes: number;
  /** Spares instantiated over the worker's life. */
  instantiated: number;
}

/** The recycled memories of a worker (fuel/memory-import.ts), over its life. */
export interface MemoryStats {
  /** Memories made for an instance because none was free. */
  made: number;
  /** Memories an instance got zeroed after an earlier one had finished with them. */
  reused: number;
  /** Memories not given back: grown, or more than the few kept free. */
  dropped: number;
}

export interface FailureBody {
  code: string;
  message: string;
}

/** How an invocation ended, as the worker saw it. */
export type WorkerReceipt =
  | { outcome: "returned"; output: string; fuelUsed: number }
  | { outcome: "failure"; code: string; message: string; fuelUsed?: number };

/** The /workspace of an invocation: the binding's retained directory and its disk quota. */
export interface WorkspaceDirectory {
  dir: string;
  /** Bytes already leased to this invocation for growth; more are asked for as it writes. */
  lease: number;
  /** Whether the binding has a quota at all (else the lease is ignored and nothing is asked). */
  limited: boolean;
}

export type ToWorker =
  /** Files of the prepared component: its glue module, and each core module as the glue names it. */
  | { type: "load"; component: string; glue: string; coreModules: [string, string][]; facts: ComponentFacts }
  /** Drop the component (its loaded form, spares, pending load): the pool no longer keeps it compiled. */
  | { type: "unload"; component: string }
  | {
      type: "invoke";
      invocation: number;
      component: string;
      entrypoint: Entrypoint;
      input: string;
      configuration: string;
      deadlineMs: number;
      fuel: number;
      grants: ServiceGrants;
      workspace?: WorkspaceDirectory;
      /** Bytes the invocation's /scratch may hold. */
      scratchQuota: number;
      /** The granted secrets' values, read at dispatch; served in memory at /secrets, never written to disk. */
      secrets: [string, string][];
      /** Whether the invocation has host services (an agent loop's turn). */
      host: boolean;
      /** Program source for a runtime component; never logged, never stored. */
      source?: string;
    }
  | { type: "cancel"; invocation: number }
  | { type: "host-result"; invocation: number; call: number; ok: true; value: string }
  | { type: "host-result"; invocation: number; call: number; ok: false; error: FailureBody }
  | { type: "report" };

export type FromWorker =
  | { type: "ready" }
  | { type: "loaded"; component: string; error?: string }
  | { type: "host-call"; invocation: number; call: number; op: "callModel" | "dispatchTools"; payload: string }
  | { type: "emit"; invocation: number; payload: string }
  /**
   * `workspaceGrowth`: bytes the invocation added to its workspace (negative when it freed some);
   * `emitsDropped`: its progress events the worker dropped past the limits.
   */
  | { type: "receipt"; invocation: number; receipt: WorkerReceipt; workspaceGrowth: number; emitsDropped: number }
  | { type: "report"; spares: SpareStats; memories: MemoryStats; loaded: number; rssBytes: number; typeStripper: boolean };

/**
 * The worker's synchronous channel (its own socket pair; a line of JSON each): a request for more
 * workspace quota, written with a blocking write, the worker blocked reading the answer (one
 * request at a time). (That an invocation's guest is about to run goes in the start register
 * instead: start-register.ts.)
 */
export type SyncNote = { type: "lease" } & LeaseRequest;

export interface LeaseRequest {
  invocation: number;
  bytes: number;
}

export interface LeaseAnswer {
  granted: number;
}
