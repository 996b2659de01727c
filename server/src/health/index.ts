import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status, type HealthCheckRequest } from "../../../gen/grpc/health/v1/health_pb.js";
import { serviceError } from "../errors/index.ts";

export { Health } from "../../../gen/grpc/health/v1/health_pb.js";

/** Why a server that answers is not ready for traffic, or that it is. */
export type Readiness = "ready" | "starting" | "draining" | "storage_unreachable";

/** How often the metadata store is probed while it is unreachable, and while it is not. */
const PROBE_INTERVAL_MS = 5_000;

/**
 * Liveness and readiness (docs/operations.md, "Health and readiness"). A server that answers at
 * all is live. It is ready once it has started (storage opened and migrated, the preparation file
 * prepared, interrupted runs resumed), until it starts draining, and while its metadata store
 * answers: a storage failure seen by any call, or by the probe the server runs every few seconds,
 * makes it not ready until a probe succeeds again.
 *
 * The standard gRPC health service reports it: "" names the whole server, every served service
 * name is known too, and each is SERVING only when the server is ready. A watch follows changes
 * and ends when the server drains, so that it does not hold shutdown open.
 */
export class HealthState {
  readonly #known: ReadonlySet<string>;
  #phase: "starting" | "started" | "draining" = "starting";
  #storageReachable = true;
  #probe: (() => Promise<void>) | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #watchers = new Set<() => void>();

  constructor(serviceNames: readonly string[]) {
    this.#known = new Set(["", ...serviceNames]);
  }

  /** Everything is wired and listening: ready from now on, while storage answers. */
  started(): void {
    if (this.#phase === "starting") this.#set(() => (this.#phase = "started"));
  }

  /** Shutting down: not ready again, for good. */
  setNotServing(): void {
    clearInterval(this.#timer);
    this.#set(() => (this.#phase = "draining"));
  }

  /** Probes the metadata store every few seconds (a read that fails makes the server not ready until one succeeds). */
  watchStorage(probe: () => Promise<void>): void {
    this.#probe = probe;
    this.#timer = setInterval(() => void this.probeStorage(), PROBE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** A call failed on storage: not ready until the next probe succeeds. */
  storageFailed(): void {
    if (this.#storageReachable) this.#set(() => (this.#storageReachable = false));
  }

  /** Probes the store now (the timer does so every few seconds); resolves once the state reflects it. */
  async probeStorage(): Promise<void> {
    if (!this.#probe || this.#phase === "draining") return;
    const reachable = await this.#probe().then(
      () => true,
      () => false,
    );
    if (reachable !== this.#storageReachable) this.#set(() => (this.#storageReachable = reachable));
  }

  readiness(): Readiness {
    if (this.#phase === "starting") return "starting";
    if (this.#phase === "draining") return "draining";
    return this.#storageReachable ? "ready" : "storage_unreachable";
  }

  status(service: string): Status {
    if (!this.#known.has(service)) return Status.SERVICE_UNKNOWN;
    return this.readiness() === "ready" ? Status.SERVING : Status.NOT_SERVING;
  }

  service(): ServiceImpl<typeof Health> {
    return {
      check: (request: HealthCheckRequest) => {
        const status = this.status(request.service);
        if (status === Status.SERVICE_UNKNOWN) throw serviceError("route_not_found", `unknown service ${request.service}`);
        return { status };
      },
      watch: (request: HealthCheckRequest, context: HandlerContext) => this.#watch(request.service, context.signal),
    };
  }

  #set(change: () => void): void {
    change();
    for (const wake of [...this.#watchers]) wake();
  }

  async *#watch(service: string, signal: AbortSignal) {
    let last: Status | undefined;
    while (!signal.aborted) {
      const status = this.status(service);
      if (status !== last) yield { status };
      // A draining server ends its watches so that they do not hold shutdown open.
      if (this.#phase === "draining") return;
      last = status;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.#watchers.delete(wake);
          signal.removeEventListener("abort", wake);
          resolve();
        };
        this.#watchers.add(wake);
        signal.addEventListener("abort", wake);
      });
    }
  }
}
