export { DEADLINE_GRACE_MS, Pool } from "./pool.ts";
export type {
  ComponentRef,
  HostServices,
  Invocation,
  PoolOptions,
  PoolStats,
  Receipt,
  SecretSource,
  ServiceGrants,
  WorkerStats,
} from "./types.ts";
