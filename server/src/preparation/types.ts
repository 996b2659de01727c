/** A component to prepare: its id (content address) and its raw bytes, fetched only when needed. */
export interface ComponentRef {
  id: string;
  load(): Promise<Uint8Array>;
}

/** Which contract of wit/env.wit a component implements, read from its exports. */
export type Entrypoint = "run" | "turn";

/** The on-disk manifest of one prepared component (`manifest.json`, written last). */
export interface PreparedManifest {
  format: number;
  id: string;
  toolchain: string;
  /** Exported entrypoints among `run` and `turn`. */
  entrypoints: Entrypoint[];
  /** Interfaces the component imports, as jco names them (unversioned, e.g. `wasi:io/streams`). */
  imports: string[];
  /** The JS glue module (jco `--instantiation async` output, JSPI mode). */
  glue: string;
  /** Whether the glue carries the instance warm-up (server/src/preparation/glue.ts). */
  glueWarmUp: boolean;
  /** Core modules, instrumented for fuel and with their memories capped, in the glue's names. */
  coreModules: string[];
  functionsInstrumented: number;
  memoryPages: number;
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
