export { apiKeyInterceptor } from "./auth.ts";
export { UploadError, type FetchFunction, type UploadResult } from "./assets.ts";
export { createServiceClient, type ServiceClient, type ServiceClientOptions } from "./client.ts";
export { Skill, type FileContents, type FromUrlOptions, type SkillBundle, type SkillsClient, type UploadedSkill } from "./skills/index.ts";
export { BundleFormatError, canonicalZip, validateSkillName } from "./bundle/index.ts";
export { program, Program, type ComponentBytes, type EnvClient, type ProgramOptions, type ResolvedProgram } from "./env/index.ts";
