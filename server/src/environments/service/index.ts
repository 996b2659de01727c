// The service environment: admitted components run by the engine (server/src/engine,
// docs/environments.md). Its parts: grants/ (parsing and the deployment allow-lists), startup.ts
// (the pool and the preparation file), service-environment.ts (the adapter of the environment
// port), confined-write.ts (staging files into a workspace).
export { ServiceEnvironmentKind, type ServiceImplementation, type ServiceKindOptions } from "./service-environment.ts";
export { startServiceEnvironment, type ServiceEnvironment } from "./startup.ts";
