export { loadSettings, SettingsError, type EnvironmentSettings, type Limits, type Settings } from "./settings.ts";
export { isWorkspaceName, type ListenAddress } from "./parsers.ts";
