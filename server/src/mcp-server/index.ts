export { createMcpEndpoint, MCP_PATH, MCP_SESSIONS_PREFIX, type McpEndpointOptions } from "./endpoint.ts";
