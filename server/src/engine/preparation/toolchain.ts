import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { HOST_INTERFACE, SUSPENDING_HOST_FUNCTIONS, WORLDS } from "../component/index.ts";
import { PAGE_BYTES } from "../wasm/index.ts";

/**
 * Version of the prepared-directory layout, of the transpile options below and of the glue
 * patch (glue.ts). Bump it whenever one changes: every prepared component is then redone once
 * (a new toolchain directory).
 */
export const PREPARED_FORMAT = 5;

/** The wasi:io functions that may wait, as jco names async imports (each suspends the guest: wasi/blocking.ts). */
const SUSPENDING_WASI_FUNCTIONS = [
  "wasi:io/poll#poll",
  "wasi:io/poll#[method]pollable.block",
  "wasi:io/streams#[method]input-stream.blocking-read",
  "wasi:io/streams#[method]input-stream.blocking-skip",
  "wasi:io/streams#[method]output-stream.blocking-flush",
  "wasi:io/streams#[method]output-stream.blocking-write-and-flush",
  "wasi:io/streams#[method]output-stream.blocking-write-zeroes-and-flush",
  "wasi:io/streams#[method]output-stream.blocking-splice",
];

/**
 * jco options of every preparation. `instantiation: "async"` yields `instantiate(getCoreModule,
 * imports, instantiateCore)`, called once per invocation for a fresh instance; JSPI lets a guest
 * suspend on an async host import without holding its worker thread.
 */
export const TRANSPILE_OPTIONS = {
  name: "component",
  instantiation: "async",
  asyncMode: "jspi",
  // Host calls and every blocking wasi:io call (waiting on a timer, an HTTP response or body)
  // suspend the guest instead of holding its worker's thread (wasi/blocking.ts).
  asyncImports: [...SUSPENDING_HOST_FUNCTIONS.map((name) => `${HOST_INTERFACE}#${name}`), ...SUSPENDING_WASI_FUNCTIONS],
  asyncExports: Object.keys(WORLDS),
  // Every core module as its own file (none inlined as base64 into the JS): each is instrumented.
  base64Cutoff: 0,
  emitTypescriptDeclarations: false,
} as const;

const MiB = 1024 * 1024;

export function memoryPages(memoryMib: number): number {
  return Math.floor((memoryMib * MiB) / PAGE_BYTES);
}

export interface Toolchain {
  /** Short hash naming `<dataDir>/prepared/<id>/`. */
  id: string;
  jco: string;
  jcoTranspile: string;
  fuelSourceHash: string;
  memoryPages: number;
}

/**
 * Identifies everything that shapes prepared output: the jco and jco-transpile versions (the
 * glue generator), the fuel rewriter's source, the contract's source (server/src/engine/component: what a
 * prepared component was checked against, and what its manifest records of it), the preparation
 * steps' source (transpile worker, glue patch), the memory cap and the transpile options. A change to any of them selects a
 * fresh directory, so stale output is never reused. The rewriter and the component reader decode
 * (and the rewriter encodes) with server/src/engine/wasm, whose source therefore counts as part of each.
 */
export async function toolchain(memoryMib: number): Promise<Toolchain> {
  const require = createRequire(import.meta.url);
  const jcoEntry = require.resolve("@bytecodealliance/jco");
  const jco = await packageVersion(jcoEntry);
  const transpileEntry = createRequire(jcoEntry).resolve("@bytecodealliance/jco-transpile");
  const jcoTranspile = await packageVersion(transpileEntry);
  const fuelSourceHash = await sourceHash("../wasm/", "../fuel/");
  // The steps of preparation itself (instrument + cap order, the glue patch).
  const stepsHash = createHash("sha256");
  for (const name of ["transpile-worker.ts", "glue.ts"]) stepsHash.update(await readFile(fileURLToPath(new URL(`./${name}`, import.meta.url))));
  const pages = memoryPages(memoryMib);
  const id = createHash("sha256")
    .update(
      JSON.stringify({
        format: PREPARED_FORMAT,
        jco,
        jcoTranspile,
        fuelSourceHash,
        contract: await sourceHash("../wasm/", "../component/"),
        steps: stepsHash.digest("hex"),
        pages,
        options: TRANSPILE_OPTIONS,
      }),
    )
    .digest("hex")
    .slice(0, 16);
  return { id, jco, jcoTranspile, fuelSourceHash, memoryPages: pages };
}

/** A hash of the TypeScript sources of directories of server/src, relative to this one. */
async function sourceHash(...relativeDirs: string[]): Promise<string> {
  const hash = createHash("sha256");
  for (const relativeDir of relativeDirs) {
    const dir = fileURLToPath(new URL(relativeDir, import.meta.url));
    for (const name of (await readdir(dir)).filter((file) => file.endsWith(".ts")).sort()) {
      hash
        .update(`${relativeDir}${name}\0`)
        .update(await readFile(join(dir, name)))
        .update("\0");
    }
  }
  return hash.digest("hex");
}

/** Walks up from a resolved entry file to its package.json. */
async function packageVersion(entry: string): Promise<string> {
  let dir = dirname(entry);
  for (;;) {
    try {
      const manifest = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (manifest.name && manifest.version) return manifest.version;
    } catch {
      // not here: keep walking up
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${entry}`);
    dir = parent;
  }
}
