export { createEnvClient, type EnvClient, type PrepareRequest } from "./env-client.ts";
export { program, Program, type ComponentBytes, type ProgramOptions, type ResolvedProgram } from "./program.ts";
