// Messages between the pool (main thread) and its workers. Everything here crosses a
// structured-clone boundary: no functions, and WebAssembly.Module objects are shared, not copied.
import type { Entrypoint, ImportedInterface } from "../component/index.ts";
import type { ServiceGrants } from "../grants.ts";

export interface WorkerBoot {
  /**
   * One Int32: the invocation whose guest code is on the worker thread right now (0: none). The
   * worker writes it when a guest starts or resumes and clears it when the guest suspends or
   * ends; the main thread reads it at a deadline to tell a computing guest from a waiting one.
   */
  onThread: SharedArrayBuffer;
  /** Cap of each guest memory, in 64 KiB pages (to recognise memory exhaustion). */
  memoryPages: number;
  /** Fuel given to a spare instance at start-up (only start-up code runs on it). */
  spareFuel: number;
  spareInstances: number;
  spareMemoryBytes: number;
}

/**
 * The host directories behind an invocation's grant, made ready by the main thread before it
 * sends the invocation: the binding's retained workspace, and the invocation's own scratch and
 * secrets directories. The worker maps each to its guest path with the grant's mode.
 */
export interface GrantDirs {
  workspace?: string;
  scratch?: string;
  secrets?: string;
}

/** What a worker needs to know about a prepared component, from its manifest. */
export interface ComponentFacts {
  entrypoints: Entrypoint[];
  imports: ImportedInterface[];
  /** Guest memory a fresh instance starts with: the minimums of the memories its core modules define. */
  initialMemoryBytes: number;
}

/** The spare instances of a worker (pool.testing.spares). */
export interface SpareStats {
  /** Spares waiting now, over every component. */
  instances: number;
  /** Guest memory they hold. */
  bytes: number;
  /** Spares instantiated over the worker's life. */
  instantiated: number;
}

export interface FailureBody {
  code: string;
  message: string;
}

export type WorkerReceipt =
  | { outcome: "returned"; output: string; fuelUsed: number }
  | { outcome: "failure"; code: string; message: string; fuelUsed?: number };

export type ToWorker =
  | {
      t: "load";
      id: string;
      glueUrl: string;
      modules: [string, WebAssembly.Module][];
      facts: ComponentFacts;
    }
  | {
      t: "invoke";
      n: number;
      id: string;
      entrypoint: Entrypoint;
      input: string;
      configuration: string;
      deadlineMs: number;
      fuel: number;
      grants: ServiceGrants;
      dirs: GrantDirs;
      host: boolean;
      /** Program source for a runtime component; never logged, never stored. */
      source?: string;
    }
  /** Drop the component (its loaded form, spares, pending load): the pool no longer keeps it compiled. */
  | { t: "unload"; id: string }
  | { t: "cancel"; n: number }
  | { t: "host-result"; n: number; call: number; ok: true; value: string }
  | { t: "host-result"; n: number; call: number; ok: false; error: FailureBody }
  | { t: "spares" };

export type FromWorker =
  | { t: "ready" }
  | { t: "loaded"; id: string; error?: string }
  | { t: "host"; n: number; call: number; op: "callModel" | "dispatchTools"; payload: string }
  | { t: "emit"; n: number; payload: string }
  | { t: "done"; n: number; receipt: WorkerReceipt }
  | ({ t: "spares" } & SpareStats);
