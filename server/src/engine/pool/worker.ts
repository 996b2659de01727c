// A pool worker thread. It loads prepared components (glue module + compiled core modules posted
// by the main thread), runs each invocation in a fresh instance, and relays host calls to the
// main thread. Guests that wait on the host are suspended by JSPI and hold no thread, so one
// worker carries many agent loops; a guest that computes blocks this thread until it returns,
// traps, runs out of fuel, or the main thread terminates the worker at its deadline.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parentPort, workerData } from "node:worker_threads";
import { GuestFilesystem, LocalQuota, type Descriptor, type PreopenDirectory } from "../wasi/filesystem/index.ts";
import { classify, instantiate, loadComponent, Spares, type GuestInstance, type LoadedComponent, type Scope } from "./guest.ts";
import type { FailureBody, FromWorker, ToWorker, WorkerBoot, WorkerReceipt } from "./protocol.ts";

const port = parentPort;
if (!port) throw new Error("pool/worker.ts must run as a worker thread");
// A stray rejection from guest glue (e.g. a dropped guest's internal promise) must not take the
// worker, and every invocation in it, down. The pool's own promises are all handled.
process.on("unhandledRejection", () => undefined);
const boot = workerData as WorkerBoot;

const onThread = new Int32Array(boot.onThread);
const components = new Map<string, LoadedComponent>();
const loading = new Map<string, Promise<LoadedComponent>>();
const spares = new Spares(boot.spareInstances, boot.spareMemoryBytes, BigInt(boot.spareFuel), components);

type InvokeMessage = Extract<ToWorker, { t: "invoke" }>;

/** Disk a guest may use in its /scratch (files, plus 4 KiB per entry): a constant until grants say more. */
const SCRATCH_QUOTA_BYTES = 1024 * 1024 * 1024;

/** One invocation in this worker. */
class Invocation implements Scope {
  readonly n: number;
  readonly preopens: [Descriptor, string][];
  network: readonly string[];
  readonly #hostAllowed: boolean;
  readonly #filesystem: GuestFilesystem;
  /** The instance serving this invocation, once there is one. */
  instance: GuestInstance | undefined;
  readonly #calls = new Map<number, { resolve: (value: string) => void; reject: (error: FailureBody | Error) => void }>();
  #nextCall = 1;
  #timer: NodeJS.Timeout | undefined;
  finished = false;

  constructor(message: InvokeMessage) {
    this.n = message.n;
    this.network = message.grants.network;
    this.#hostAllowed = message.host;
    this.#filesystem = guestFilesystem(message);
    this.preopens = this.#filesystem.preopens();
  }

  /**
   * Guest code of this invocation takes the thread. Called right before the guest starts or is
   * resumed: a resumption runs in the microtasks of the same macrotask (one host result or one
   * poll timer per macrotask), so no other guest can run in between.
   */
  resuming(): void {
    Atomics.store(onThread, 0, this.n);
  }

  /** The guest leaves the thread (it suspends on an async import, or it ended). */
  suspending(): void {
    Atomics.compareExchange(onThread, 0, this.n, 0);
  }

  hostCall(op: "callModel" | "dispatchTools", payload: string): Promise<string> {
    this.suspending();
    if (this.finished) return Promise.reject(abandoned());
    if (!this.#hostAllowed) return Promise.reject({ code: "host_unavailable", message: "this invocation has no host services" });
    const call = this.#nextCall++;
    return new Promise<string>((resolve, reject) => {
      this.#calls.set(call, { resolve, reject });
      send({ t: "host", n: this.n, call, op, payload });
    });
  }

  emit(payload: string): void {
    if (!this.finished && this.#hostAllowed) send({ t: "emit", n: this.n, payload });
  }

  hostResult(message: Extract<ToWorker, { t: "host-result" }>): void {
    const pending = this.#calls.get(message.call);
    this.#calls.delete(message.call);
    if (!pending || this.finished) return;
    this.resuming();
    if (message.ok) pending.resolve(message.value);
    else pending.reject({ code: message.error.code, message: message.error.message });
  }

  /** Reports `timeout` at the deadline if the guest is still suspended then. */
  armDeadline(deadlineMs: number, fuelUsed: () => number): void {
    this.#timer = setTimeout(
      () => this.finish({ outcome: "failure", code: "timeout", message: "the invocation passed its deadline", fuelUsed: fuelUsed() }),
      Math.max(0, deadlineMs - Date.now()),
    );
  }

  /**
   * Sends the receipt, then takes everything away from the guest: its descriptors stop working,
   * its preopens and origins are gone, its fuel is negative (any guest code that still runs traps
   * at its next check), and a guest suspended on the host is resumed with an exception that
   * unwinds it, so its stack and memory can be collected.
   */
  finish(receipt: WorkerReceipt): void {
    if (this.finished) return;
    this.finished = true;
    this.suspending();
    clearTimeout(this.#timer);
    running.delete(this.n);
    send({ t: "done", n: this.n, receipt });
    this.#filesystem.revoke();
    this.preopens.length = 0;
    this.network = [];
    if (this.instance) this.instance.fuel.value = -1n;
    const pending = [...this.#calls.values()];
    this.#calls.clear();
    for (const call of pending) call.reject(abandoned());
  }
}

/**
 * The grant's preopens over the directories the pool made ready: /workspace and /scratch with
 * their modes ("read" is read-only), /secrets from memory (its files are read now, once).
 */
function guestFilesystem({ grants, dirs }: InvokeMessage): GuestFilesystem {
  const preopens: PreopenDirectory[] = [];
  const { workspace, scratch } = grants.filesystem;
  if (workspace) preopens.push({ guestPath: "/workspace", hostDir: granted("/workspace", dirs.workspace), readOnly: workspace !== "write" });
  if (scratch) preopens.push({ guestPath: "/scratch", hostDir: granted("/scratch", dirs.scratch), readOnly: scratch !== "write", quota: new LocalQuota(SCRATCH_QUOTA_BYTES) });
  const secrets = grants.secrets.length > 0 ? readSecretFiles(granted("/secrets", dirs.secrets)) : undefined;
  return new GuestFilesystem({ preopens, secrets });
}

function granted(guestPath: string, hostDir: string | undefined): string {
  if (hostDir === undefined) throw new Error(`no host directory was made ready for ${guestPath}`);
  return hostDir;
}

/** The secrets directory the pool wrote (one file per granted secret), as name to value. */
function readSecretFiles(dir: string): Map<string, string> {
  return new Map(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), "utf8")]));
}

const running = new Map<number, Invocation>();

/** What unwinds an abandoned guest: an Error (not a failure record), so the glue rethrows it as a trap. */
function abandoned(): Error {
  return new Error("the invocation has ended");
}

function send(message: FromWorker): void {
  port!.postMessage(message);
}

port.on("message", (message: ToWorker) => {
  switch (message.t) {
    case "load":
      load(message);
      break;
    case "unload":
      unload(message.id);
      break;
    case "invoke":
      void invoke(message);
      break;
    case "host-result":
      running.get(message.n)?.hostResult(message);
      break;
    case "cancel":
      // Handled between macrotasks, so this invocation's guest is not on the thread: it is
      // waiting (on the host, a timer, I/O) or not started, and stops cleanly.
      running.get(message.n)?.finish({ outcome: "failure", code: "cancelled", message: "the invocation was cancelled" });
      break;
    case "spares":
      send({ t: "spares", instances: [...components.values()].reduce((sum, component) => sum + component.spares.length, 0), bytes: spares.heldBytes(), instantiated: spares.instantiated });
      break;
  }
});

function load(message: Extract<ToWorker, { t: "load" }>): void {
  const { id } = message;
  if (loading.has(id)) {
    send({ t: "loaded", id });
    return;
  }
  // No spares yet: they are kept for components in use (after an invocation), so that
  // preparing many components costs no guest memory until they are called.
  const promise = import(message.glueUrl).then((glue: { instantiate?: unknown }) => loadComponent(id, glue, message.modules, message.facts));
  loading.set(id, promise);
  promise.then(
    (component) => {
      // Unloaded meanwhile: the pool dropped this load and expects no answer to it.
      if (loading.get(id) !== promise) return;
      components.set(id, component);
      send({ t: "loaded", id });
    },
    (error: unknown) => {
      if (loading.get(id) !== promise) return;
      loading.delete(id);
      send({ t: "loaded", id, error: error instanceof Error ? error.message : String(error) });
    },
  );
}

/**
 * Forgets a component the pool unloaded (compiled-code budget). An invocation still running on
 * it keeps its own instance; no new spare is made for it (Spares refills only loaded components).
 */
function unload(id: string): void {
  const component = components.get(id);
  if (component) component.spares.length = 0;
  components.delete(id);
  loading.delete(id);
}

async function invoke(message: InvokeMessage): Promise<void> {
  let invocation: Invocation;
  try {
    invocation = new Invocation(message);
  } catch (error) {
    send({ t: "done", n: message.n, receipt: { outcome: "failure", code: "guest_trap", message: `cannot set up the guest's filesystem: ${String(error)}` } });
    return;
  }
  running.set(message.n, invocation);
  const budget = BigInt(message.fuel);
  let instance: GuestInstance | undefined;
  invocation.armDeadline(message.deadlineMs, () => (instance ? Number(budget - clampFuel(instance.fuel.value as bigint)) : 0));
  let component: LoadedComponent | undefined = components.get(message.id);
  try {
    component ??= await loading.get(message.id);
  } catch {
    component = undefined;
  }
  if (invocation.finished) return; // cancelled, or past its deadline, while the component loaded
  if (!component) {
    invocation.finish({ outcome: "failure", code: "preparation_failed", message: `component ${message.id} is not loaded on this worker` });
    return;
  }
  if (Date.now() >= message.deadlineMs) {
    // Queued behind other work until after its deadline: it never starts.
    invocation.finish({ outcome: "failure", code: "timeout", message: "the deadline passed before the invocation could start" });
    return;
  }
  let configuration = message.configuration;
  if (message.source !== undefined) {
    const wrapped = programConfiguration(message.source, message.configuration);
    if (typeof wrapped !== "string") {
      invocation.finish({ outcome: "failure", ...wrapped });
      return;
    }
    configuration = wrapped;
  }
  try {
    invocation.resuming();
    const spare = spares.take(component, invocation, budget);
    if (spare === "exhausted") {
      invocation.finish({ outcome: "failure", code: "fuel_exhausted", message: `the guest used up its fuel (${budget} units) while starting`, fuelUsed: Number(budget) });
      return;
    }
    if (spare) {
      instance = spare;
    } else {
      const binding = { scope: invocation as Scope };
      const made = instantiate(component, budget, binding);
      instance = made instanceof Promise ? await made : made;
    }
    invocation.instance = instance;
    if (invocation.finished) return;
    const entry = instance.exports[message.entrypoint];
    if (typeof entry !== "function") throw new Error(`the component exports no ${message.entrypoint}`);
    const output = await entry(message.input, configuration, BigInt(message.deadlineMs));
    const remaining = instance.fuel.value as bigint;
    if (remaining < 0n) {
      invocation.finish({ outcome: "failure", code: "fuel_exhausted", message: `the guest used up its fuel (${budget} units)`, fuelUsed: Number(budget) });
    } else if (typeof output !== "string") {
      invocation.finish({ outcome: "failure", code: "guest_trap", message: `the guest returned ${typeof output}, not a string` });
    } else {
      invocation.finish({ outcome: "returned", output, fuelUsed: Number(budget - remaining) });
    }
  } catch (error) {
    invocation.finish(classify(error, instance, budget, boot.memoryPages));
  } finally {
    invocation.suspending();
    if (instance) instance.binding.scope = undefined;
    spares.schedule(component);
  }
}

function clampFuel(remaining: bigint): bigint {
  return remaining < 0n ? 0n : remaining;
}

/** Spec §4.4: the runtime gets {source, configuration}; the source goes nowhere else. */
function programConfiguration(source: string, configuration: string): string | FailureBody {
  let original: unknown = null;
  if (configuration.trim() !== "") {
    try {
      original = JSON.parse(configuration);
    } catch {
      return { code: "invalid_argument", message: "the configuration of a program invocation is not JSON" };
    }
  }
  return JSON.stringify({ source, configuration: original });
}

send({ t: "ready" });
