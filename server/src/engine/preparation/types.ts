import type { Entrypoint, ImportedInterface } from "../component/index.ts";

export type { Entrypoint };

/** A component to prepare: its id (content address) and its raw bytes, fetched only when needed. */
export interface ComponentRef {
  id: string;
  load(): Promise<Uint8Array>;
}

/** The on-disk manifest of one prepared component (`manifest.json`, written last). */
export interface PreparedManifest {
  format: number;
  id: string;
  toolchain: string;
  /** The entrypoint it exports: `run` (tool world) or `turn` (agent-loop world). */
  entrypoints: Entrypoint[];
  /** Interfaces it imports, versioned, with the functions and resources it takes from each. */
  imports: ImportedInterface[];
  /** The JS glue module (jco `--instantiation async` output, JSPI mode). */
  glue: string;
  /** Whether the glue carries the instance warm-up (server/src/engine/preparation/glue.ts). */
  glueWarmUp: boolean;
  /** Whether the glue's text codecs and debug switch are made once per module (glue.ts). */
  glueSharedCodecs: boolean;
  /** Core modules, instrumented for fuel and with their memories capped, in the glue's names. */
  coreModules: string[];
  functionsInstrumented: number;
  /** The cap of each guest memory, in 64 KiB pages. */
  memoryPages: number;
  /** The minimum sizes of the memories the core modules define: what a fresh instance starts with. */
  initialMemoryPages: number;
  componentBytes: number;
  preparedAt: string;
  /** Milliseconds spent transpiling + instrumenting (for operators). */
  prepareMs: number;
}

/** A prepared component: where its files are and what it needs. */
export interface PreparedComponent {
  id: string;
  dir: string;
  manifest: PreparedManifest;
  /** file: URL of the glue module, importable by a worker. */
  glueUrl: string;
  /** True when it was read from disk, false when transpiled by this call. */
  fromCache: boolean;
}
