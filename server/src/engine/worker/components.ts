import { readFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { recycledMemoryLimits, type MemoryLimits } from "../fuel/memory-import.ts";
import { loadComponent, newRecycling, releaseMemories, Spares, type LoadedComponent, type Recycling } from "./guest.ts";
import type { FromWorker, SpareStats, ToWorker, WorkerBoot } from "../pool/protocol.ts";

type LoadMessage = Extract<ToWorker, { type: "load" }>;

/**
 * The components loaded in this worker: each prepared component's glue module and its core
 * modules, compiled here from the prepared directory (read-only in the sandbox), and the spare
 * instances kept of the ones in use.
 */
export class Components {
  readonly #loaded = new Map<string, LoadedComponent>();
  readonly #loading = new Map<string, Promise<LoadedComponent>>();
  readonly #send: (message: FromWorker) => void;
  readonly spares: Spares;
  /** Every component's recycled memories (guest.ts). */
  readonly recycling: Recycling = newRecycling();

  constructor(boot: WorkerBoot, send: (message: FromWorker) => void) {
    this.#send = send;
    this.spares = new Spares(boot.spareInstances, boot.spareMemoryBytes, BigInt(boot.spareFuel), this.#loaded);
  }

  /** The component, once loaded (awaiting a load in progress); undefined when it failed or is unknown. */
  async get(id: string): Promise<LoadedComponent | undefined> {
    const loaded = this.#loaded.get(id);
    if (loaded) return loaded;
    try {
      return await this.#loading.get(id);
    } catch {
      return undefined;
    }
  }

  /**
   * Compiles and loads a component, answering `loaded` once. No spares yet: they are kept for
   * components in use (after an invocation), so that preparing many costs no guest memory until
   * they are called.
   */
  load(message: LoadMessage): void {
    const id = message.component;
    if (this.#loading.has(id)) {
      this.#send({ type: "loaded", component: id });
      return;
    }
    const promise = compile(message, this.recycling);
    this.#loading.set(id, promise);
    promise.then(
      (component) => {
        // Unloaded meanwhile: the pool dropped this load and expects no answer to it.
        if (this.#loading.get(id) !== promise) return;
        this.#loaded.set(id, component);
        this.#send({ type: "loaded", component: id });
      },
      (error: unknown) => {
        if (this.#loading.get(id) !== promise) return;
        this.#loading.delete(id);
        this.#send({ type: "loaded", component: id, error: error instanceof Error ? error.message : String(error) });
      },
    );
  }

  /**
   * Forgets a component the pool unloaded (compiled-code budget). An invocation still running on
   * it keeps its own instance; no new spare is made for it (Spares refills only loaded components).
   */
  unload(id: string): void {
    const component = this.#loaded.get(id);
    if (component) {
      component.spares.length = 0;
      releaseMemories(component);
    }
    this.#loaded.delete(id);
    this.#loading.delete(id);
  }

  loadedCount(): number {
    return this.#loaded.size;
  }

  spareStats(): SpareStats {
    let instances = 0;
    for (const component of this.#loaded.values()) instances += component.spares.length;
    return { instances, bytes: this.spares.heldBytes(), instantiated: this.spares.instantiated };
  }
}

async function compile(message: LoadMessage, recycling: Recycling): Promise<LoadedComponent> {
  const { modules, recycled } = await compileCoreModules(message.coreModules);
  const glue = (await import(pathToFileURL(message.glue).href)) as { instantiate?: unknown };
  return loadComponent(message.component, glue, modules, message.facts, recycled, recycling);
}

/** Compiles a prepared component's core modules, [name, file] each, noting those whose memory is recycled and its limits. */
export async function compileCoreModules(
  files: readonly (readonly [string, string])[],
): Promise<{ modules: [string, WebAssembly.Module][]; recycled: Map<WebAssembly.Module, MemoryLimits> }> {
  const recycled = new Map<WebAssembly.Module, MemoryLimits>();
  const modules = await Promise.all(
    files.map(async ([name, file]): Promise<[string, WebAssembly.Module]> => {
      const bytes = await readFile(file);
      const module = await WebAssembly.compile(bytes);
      const limits = recycledMemoryLimits(bytes);
      if (limits) recycled.set(module, limits);
      return [name, module];
    }),
  );
  return { modules, recycled };
}
