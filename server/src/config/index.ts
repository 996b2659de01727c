export {
  loadSettings,
  SettingsError,
  type EnvironmentSettings,
  type HttpLimits,
  type Limits,
  type ProgressLimits,
  type SessionSettings,
  type Settings,
  type WorkspaceRateSettings,
} from "./settings.ts";
export { isEnvVarName, isWorkspaceName, type ListenAddress } from "./parsers.ts";
export { covers, formatOrigin, originAllowed, parseOrigin, type Origin } from "./origins.ts";
export type { TracingSettings } from "./tracing.ts";
export { MALLOC_ENVIRONMENT } from "./process-memory.ts";
