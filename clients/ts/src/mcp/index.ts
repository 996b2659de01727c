export { isMcpEnvironmentName, MAX_MCP_ENVIRONMENT_NAME, NameCollision, placementName, placementNames } from "./tool-names.ts";
export { listAllTools, MAX_TOOL_PAGES, mcpToolOf, placedDescription, ToolListingError, type ListedMcpTool, type ToolLister } from "./tool-listing.ts";
export {
  describeContent,
  isToolImage,
  MAX_TOOL_IMAGE_CHARS,
  outputOf,
  outputValue,
  TOOL_IMAGE_TYPES,
  type CallToolResult,
  type ContentBlock,
  type ToolImage,
} from "./tool-result.ts";
