export { DEFAULT_RECONNECT, type ReconnectOptions } from "./backoff.ts";
export { HostClosedError, HostConnection, ToolServerExitedError, type HostDeps, type HostState } from "./host-connection.ts";
export { defineHostEnv, hostEnv, type HostEnvironmentDefinition, type HostEnvOptions, type HostToolContext, type HostToolHandler } from "./host-env.ts";
export { declareHostStreaming, hostStreamingOf, type HostStreaming } from "./streaming.ts";
export { closeAll, startToolServers, type ListedTool, type RunningToolServer, type ToolServer } from "./tool-server.ts";
