// The service environment: admitted components on the worker pool (docs/environments.md).
// Its parts: pool/ (worker threads, fresh instances, grants inside the guest), preparation/
// (transpile, instrument, persist), fuel/ (metering by core-wasm rewriting), grants/ (parsing
// and the deployment allow-lists), startup.ts (the pool and the preparation file), kind.ts (the
// adapter of the environment port).
export { ServiceEnvironmentKind, type ServiceImplementation, type ServiceKindOptions } from "./kind.ts";
export { startServiceEnvironment, type ServiceEnvironment } from "./startup.ts";
