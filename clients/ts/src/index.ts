export { apiKeyInterceptor } from "./auth.ts";
export { UploadError, type FetchFunction, type UploadResult } from "./assets.ts";
export { createServiceClient, type ServiceClient, type ServiceClientOptions } from "./client.ts";
export { Skill, type FileContents, type FromUrlOptions, type SkillBundle, type SkillsClient, type UploadedSkill } from "./skills/index.ts";
export { BundleFormatError, canonicalZip, DEFAULT_BUNDLE_LIMITS, FRONTMATTER_LIMITS, validateSkillName, type BundleLimits } from "./bundle/index.ts";
export { SkillSourceError } from "./skills/index.ts";
export { program, Program, type ComponentBytes, type EnvClient, type ProgramOptions, type ResolvedProgram } from "./env/index.ts";
export {
  PlacementError,
  serviceEnv,
  tool,
  type AccessMode,
  type CallToolOptions,
  type EnvironmentDefinition,
  type EnvironmentState,
  type EnvironmentStatus,
  type EventsOptions,
  type ListOptions,
  type PlacedTool,
  type Prepare,
  type PreparedToolPlacement,
  type Receipt,
  type ResolvedToolImplementation,
  type ServiceEnvironmentDefinition,
  type ServiceEnvOptions,
  type Session,
  type SessionDefinition,
  type SessionEvent,
  type SessionPage,
  type SessionRecord,
  type SessionsClient,
  type SessionWithRunDefinition,
  type SessionState,
  type SetupMode,
  type SetupResult,
  type ToolCallResult,
  type ToolImplementation,
  type ToolOptions,
  type ToolPlacement,
} from "./sessions/index.ts";
export {
  Run,
  type RunFile,
  type RunModel,
  type RunOptions,
  type RunPage,
  type RunRecord,
  type RunSkill,
  type RunSkillSnapshot,
  type RunStatus,
  type RunUsage,
  type SessionRuns,
  type WaitOptions,
} from "./runs/index.ts";
export { serviceErrorCode } from "./service-error.ts";
