export {
  serviceEnv,
  type AccessMode,
  type EnvironmentDefinition,
  type ServiceEnvironmentDefinition,
  type ServiceEnvOptions,
  type SetupMode,
} from "./environments.ts";
export {
  environment,
  type ExtensionEnvironmentDefinition,
  type ExtensionInstanceOptions,
  type ExtensionKind,
  type OptionsOf,
  type OptionSpec,
  type OptionsSchema,
  type OptionType,
} from "./extension.ts";
export { mcpEnv, type McpEnvironmentDefinition, type McpEnvOptions } from "./mcp.ts";
export { PlacementError } from "./placement-error.ts";
export { createPrepare, type Prepare } from "./prepare.ts";
export { createImplementationResolver, type ImplementationResolver } from "./resolve.ts";
export type { CallToolOptions, EventsOptions, Session, SetupResult, ToolCallResult } from "./session.ts";
export {
  createSessionsClient,
  type ListOptions,
  type SessionDefinition,
  type SessionPage,
  type SessionsClient,
  type SessionWithRunDefinition,
} from "./sessions-client.ts";
export {
  tool,
  type OpaqueImplementation,
  type PreparedToolPlacement,
  type ResolvedToolImplementation,
  type ServiceToolImplementation,
  type ToolImplementation,
  type ToolApproval,
  type ToolOptions,
  type ToolPlacement,
} from "./tools.ts";
export type { EnvironmentState, EnvironmentStatus, PlacedTool, Receipt, SessionEvent, SessionRecord, SessionState } from "./wire.ts";
