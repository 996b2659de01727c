export { asPreparationFailure, Preparer, type PreparerOptions, type PreparerStats } from "./preparer.ts";
export { memoryPages, PREPARED_FORMAT, toolchain, TRANSPILE_OPTIONS, type Toolchain } from "./toolchain.ts";
export type { ComponentRef, Entrypoint, PreparedComponent, PreparedManifest } from "./types.ts";
