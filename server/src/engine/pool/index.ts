export { POOL_DEFAULTS } from "./defaults.ts";
export { DEADLINE_GRACE_MS, Pool, WorkersDidNotStart } from "./pool.ts";
export type {
  ComponentRef,
  HostServices,
  Invocation,
  InvocationKind,
  InvocationObserver,
  PoolOptions,
  PoolStats,
  WorkspaceLoad,
  Receipt,
  SecretSource,
  ServiceGrants,
  WorkerReport,
  WorkerStats,
} from "./types.ts";
