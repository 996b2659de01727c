export { DEFAULT_RECONNECT, type ReconnectOptions } from "./backoff.ts";
export { HostClosedError, HostConnection, type HostDeps, type HostState } from "./host-connection.ts";
export { hostEnv, type HostEnvironmentDefinition, type HostEnvOptions, type HostToolContext, type HostToolHandler } from "./host-env.ts";
export { declareHostStreaming, hostStreamingOf, type HostStreaming } from "./streaming.ts";
