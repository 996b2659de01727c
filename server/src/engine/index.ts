// The WebAssembly engine (docs/environments.md): reading components and checking them against
// the contract (component/), fuel metering (fuel/), the binary format's primitives the two share
// (wasm/), preparation (preparation/), and the worker pool that runs guests (pool/). It depends
// on config and errors only.
export { checkImports, checkWorld, ComponentFormatError, readComponent, worldOf, type ComponentWorld, type Entrypoint, type World } from "./component/index.ts";
export type { AccessMode, ServiceGrants } from "./grants.ts";
export {
  DEADLINE_GRACE_MS,
  Pool,
  POOL_DEFAULTS,
  WorkersDidNotStart,
  type ComponentRef,
  type HostServices,
  type Invocation,
  type InvocationKind,
  type PoolOptions,
  type PoolStats,
  type WorkspaceLoad,
  type Receipt,
  type SecretSource,
  type WorkerReport,
  type WorkerStats,
} from "./pool/index.ts";
