export { isMcpEnvironmentName, MAX_MCP_ENVIRONMENT_NAME, NameCollision, placementName, placementNames } from "./tool-names.ts";
export { describeContent, outputOf, outputValue, type CallToolResult, type ContentBlock } from "./tool-result.ts";
