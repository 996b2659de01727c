// A child process that turns component bytes into prepared files: jco transpile (seconds of
// synchronous work for a componentize-js component), then fuel instrumentation and the memory
// cap of every core module, and a small memory made an import the worker recycles. It runs off the main thread so the server keeps serving meanwhile,
// and in its own process because what it allocates (jco's own WebAssembly memory, which never
// shrinks, and hundreds of MB of buffers) stayed in a thread's heap and malloc arenas long after
// the thread ended: the server kept about 260 MB more after a cold start than after a warm one.
import { transpile } from "@bytecodealliance/jco";
import { capMemory, definedMemoryPages, importDefinedMemory, instrumentFuel } from "../fuel/index.ts";
import { shareCodecs, warmGlue } from "./glue.ts";
import { TRANSPILE_OPTIONS } from "./toolchain.ts";

export interface TranspileJob {
  job: number;
  bytes: Uint8Array;
  memoryPages: number;
}

export type TranspileReply =
  | {
      job: number;
      ok: true;
      glue: Uint8Array;
      /** Whether the glue got the instance warm-up (glue.ts). */
      glueWarmUp: boolean;
      /** Whether the glue's text codecs and debug switch are per module (glue.ts). */
      glueSharedCodecs: boolean;
      /** [file name, instrumented + capped (+ memory imported) bytes] in the glue's names. */
      coreModules: [string, Uint8Array][];
      functionsInstrumented: number;
      /** The minimum sizes of the memories the core modules define, in pages. */
      initialMemoryPages: number;
      ms: number;
    }
  | { job: number; ok: false; stage: string; message: string };

/**
 * The largest initial memory (in 64 KiB pages: 16 MiB, a StarlingMonkey component's 9 MiB
 * included) a worker may recycle (memory-import.ts). Zeroing 10 MiB that is resident costs about
 * 0.25 ms here; a fresh memory costs more as soon as its guest touches a few hundred KiB of it.
 */
const RECYCLED_MEMORY_MAX_PAGES = 256;

if (!process.send) throw new Error("transpile-worker.ts must run as a child process with an IPC channel");
const reply = (message: TranspileReply) => process.send!(message);

// One job at a time: the work is synchronous anyway, and order keeps memory use bounded.
let queue: Promise<void> = Promise.resolve();
process.on("message", (job: TranspileJob) => {
  queue = queue.then(() => run(job));
});
// The server went away: nothing left to do for it.
process.on("disconnect", () => process.exit(0));

async function run(job: TranspileJob): Promise<void> {
  const started = performance.now();
  let stage = "transpile";
  try {
    // A fresh options object: jco mutates the one it is given.
    const result = await transpile(job.bytes, {
      ...TRANSPILE_OPTIONS,
      asyncImports: [...TRANSPILE_OPTIONS.asyncImports],
      asyncExports: [...TRANSPILE_OPTIONS.asyncExports],
    } as never);
    let glue: Uint8Array | undefined;
    const coreModules: [string, Uint8Array][] = [];
    let functionsInstrumented = 0;
    let initialMemoryPages = 0;
    for (const [name, bytes] of Object.entries(result.files)) {
      if (name.endsWith(".wasm")) {
        stage = `instrument ${name}`;
        const instrumented = instrumentFuel(bytes);
        functionsInstrumented += instrumented.functionsInstrumented;
        stage = `cap memory of ${name}`;
        const capped = capMemory(instrumented.bytes, job.memoryPages);
        initialMemoryPages += definedMemoryPages(capped);
        stage = `import the memory of ${name}`;
        coreModules.push([name, importDefinedMemory(capped, RECYCLED_MEMORY_MAX_PAGES) ?? capped]);
      } else if (name.endsWith(".js")) {
        if (glue) throw new Error(`jco produced more than one JS file (${name})`);
        glue = bytes;
      }
    }
    if (!glue) throw new Error("jco produced no JS glue");
    stage = "patch the glue";
    const warmed = warmGlue(new TextDecoder().decode(glue));
    const shared = shareCodecs(warmed.source);
    const done: TranspileReply = {
      job: job.job,
      ok: true,
      glue: new TextEncoder().encode(shared.source),
      glueWarmUp: warmed.warmed,
      glueSharedCodecs: shared.shared,
      coreModules,
      functionsInstrumented,
      initialMemoryPages,
      ms: Math.round(performance.now() - started),
    };
    reply(done);
  } catch (error) {
    reply({ job: job.job, ok: false, stage, message: error instanceof Error ? error.message : String(error) });
  }
}
