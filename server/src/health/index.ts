import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status, type HealthCheckRequest } from "../../../gen/grpc/health/v1/health_pb.js";
import { serviceError } from "../errors/index.ts";

export { Health } from "../../../gen/grpc/health/v1/health_pb.js";

/**
 * The standard gRPC health service. "" names the whole server; every served service name is
 * known too. Shutdown flips all of them to NOT_SERVING so load balancers drain first.
 */
export class HealthState {
  readonly #known: ReadonlySet<string>;
  #serving = true;
  readonly #watchers = new Set<() => void>();

  constructor(serviceNames: readonly string[]) {
    this.#known = new Set(["", ...serviceNames]);
  }

  setNotServing(): void {
    this.#serving = false;
    for (const wake of this.#watchers) wake();
  }

  status(service: string): Status {
    if (!this.#known.has(service)) return Status.SERVICE_UNKNOWN;
    return this.#serving ? Status.SERVING : Status.NOT_SERVING;
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

  async *#watch(service: string, signal: AbortSignal) {
    let last: Status | undefined;
    while (!signal.aborted) {
      const status = this.status(service);
      if (status !== last) yield { status };
      // A draining server ends its watches so that they do not hold shutdown open.
      if (status === Status.NOT_SERVING) return;
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
