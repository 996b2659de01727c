export { McpEnvironmentKind, type McpKindOptions, type McpOptions } from "./mcp-environment.ts";
export { placementName } from "@skillenv/client/mcp";
