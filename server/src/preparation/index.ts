export { PROVIDED_IMPORTS, unprovidedImports } from "./imports.ts";
export { asPreparationFailure, Preparer, type PreparerOptions, type PreparerStats } from "./preparer.ts";
export { HOST_INTERFACE, memoryPages, PREPARED_FORMAT, toolchain, TRANSPILE_OPTIONS, type Toolchain } from "./toolchain.ts";
export type { ComponentRef, Entrypoint, PreparedComponent, PreparedManifest } from "./types.ts";
