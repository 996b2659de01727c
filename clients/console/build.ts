/**
 * Builds the web console into the static files the service serves under /console/:
 *
 *   build/console/index.html                 the page, naming the two files below
 *   build/console/favicon.svg
 *   build/console/assets/console-<hash>.js   the TypeScript of src/, bundled with @skillenv/client/web
 *   build/console/assets/console-<hash>.css
 *
 * Files under assets/ carry a hash of their content in their name, so the service can let
 * browsers cache them for good; index.html is revalidated on every load and names the current
 * ones. Run by `npm install` (postinstall) and `npm run build:console`; esbuild takes a fraction
 * of a second, so every run builds afresh.
 *
 *   node clients/console/build.ts [outDir]
 */
import { mkdir, readFile, rename, rm, writeFile, copyFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const SOURCE = join(HERE, "src");
export const CONSOLE_BUILD_DIR = resolve(HERE, "../../build/console");

/**
 * The oldest browsers the bundle's syntax is lowered for: the first releases with AbortSignal.any,
 * the newest built-in the client relies on (docs/clients/browser.md).
 */
const BROWSERS = ["chrome116", "edge116", "firefox124", "safari17.4"];

export interface BuiltConsole {
  outDir: string;
  /** Paths relative to outDir, with their sizes. */
  files: Array<{ path: string; bytes: number }>;
}

/** Builds into a fresh directory beside outDir, then swaps it in, so a reader never sees half a build. */
export async function buildConsole(outDir: string = CONSOLE_BUILD_DIR): Promise<BuiltConsole> {
  const staging = `${outDir}.building-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  try {
    const files = await buildInto(staging);
    await rm(outDir, { recursive: true, force: true });
    await mkdir(dirname(outDir), { recursive: true });
    await rename(staging, outDir);
    return { outDir, files };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function buildInto(dir: string): Promise<BuiltConsole["files"]> {
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    entryPoints: { console: join(SOURCE, "main.ts") },
    outdir: join(dir, "assets"),
    entryNames: "[name]-[hash]",
    bundle: true,
    format: "esm",
    platform: "browser",
    target: BROWSERS,
    minify: true,
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
  });
  const outputs = Object.keys(result.metafile.outputs).map((path) => relative(dir, path));
  const page = (await readFile(join(SOURCE, "index.html"), "utf8"))
    .replace("%CONSOLE_JS%", `assets/${basename(only(outputs, ".js"))}`)
    .replace("%CONSOLE_CSS%", `assets/${basename(only(outputs, ".css"))}`);
  await writeFile(join(dir, "index.html"), page);
  await copyFile(join(SOURCE, "favicon.svg"), join(dir, "favicon.svg"));
  const paths = [...outputs, "index.html", "favicon.svg"].sort();
  return Promise.all(paths.map(async (path) => ({ path, bytes: (await readFile(join(dir, path))).byteLength })));
}

function only(outputs: readonly string[], extension: string): string {
  const matching = outputs.filter((path) => path.endsWith(extension));
  if (matching.length !== 1) throw new Error(`the console build produced ${matching.length} ${extension} files, expected one`);
  return matching[0]!;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const built = await buildConsole(process.argv[2] ? resolve(process.argv[2]) : undefined);
    const total = built.files.reduce((sum, file) => sum + file.bytes, 0);
    process.stdout.write(`console: ${built.files.length} files, ${Math.round(total / 1024)} KiB -> ${relative(process.cwd(), built.outDir)}\n`);
  } catch (error) {
    // esbuild is a devDependency: an install without them (--omit=dev) goes on without the
    // console, and the service answers /console/ with how to build it.
    if (!isMissingEsbuild(error)) throw error;
    process.stdout.write("console: not built, esbuild is not installed (an install without devDependencies?)\n");
  }
}

function isMissingEsbuild(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === "ERR_MODULE_NOT_FOUND" && String((error as Error).message).includes("'esbuild'");
}
