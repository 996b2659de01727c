import { mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { GuestFilesystem, LocalQuota, type PreopenDirectory } from "../wasi/filesystem/index.ts";
import type { FailureBody, FromWorker, ToWorker, WorkerBoot, WorkerReceipt } from "../pool/protocol.ts";
import type { Components } from "./components.ts";
import { classify, instantiate, recycleMemories, type GuestInstance, type Scope } from "./guest.ts";
import type { ThreadClaim } from "./thread-claim.ts";
import type { StartRegister } from "../pool/start-register.ts";
import type { SyncChannel } from "./sync-channel.ts";
import { WorkspaceLease } from "./workspace-lease.ts";

type InvokeMessage = Extract<ToWorker, { type: "invoke" }>;
type HostResult = Extract<ToWorker, { type: "host-result" }>;
/** Sends a message; `flushed` is called once it is in the kernel's socket buffer. */
type Send = (message: FromWorker, flushed?: () => void) => void;

/** One invocation in this worker: what its guest's imports reach, and how it ends. */
class Invocation implements Scope {
  readonly number: number;
  readonly filesystem: GuestFilesystem;
  network: readonly string[];
  readonly #hostAllowed: boolean;
  readonly #maxEmits: number;
  readonly #maxEmitBytes: number;
  #emits = 0;
  #emitsDropped = 0;
  readonly #deadlineMs: number;
  readonly #claim: ThreadClaim;
  readonly #workspace: WorkspaceLease | undefined;
  readonly #scratch: string | undefined;
  readonly #send: Send;
  readonly #onEnd: () => void;
  /** The instance serving this invocation, once there is one. */
  instance: GuestInstance | undefined;
  /** Its slot in the start register, once its guest may run; freed once its receipt is sent. */
  registered: { register: StartRegister; slot: number } | undefined;
  readonly #calls = new Map<number, { resolve: (value: string) => void; reject: (error: FailureBody | Error) => void }>();
  #nextCall = 1;
  #timer: NodeJS.Timeout | undefined;
  finished = false;
  /** Settles the first time its guest leaves the thread (it suspends, or it ended). */
  readonly yielded: Promise<void>;
  #yield!: () => void;

  constructor(message: InvokeMessage, boot: WorkerBoot, claim: ThreadClaim, channel: SyncChannel, send: Send, onEnd: () => void) {
    this.number = message.invocation;
    this.network = message.grants.network;
    this.#hostAllowed = message.host;
    this.#maxEmits = boot.maxEmits;
    this.#maxEmitBytes = boot.maxEmitBytes;
    this.#deadlineMs = message.deadlineMs;
    this.#claim = claim;
    this.#send = send;
    this.#onEnd = onEnd;
    this.yielded = new Promise<void>((resolve) => (this.#yield = resolve));
    const { filesystem } = message.grants;
    const preopens: PreopenDirectory[] = [];
    if (filesystem.workspace) {
      if (!message.workspace) throw new Error("no workspace directory came with a workspace grant");
      const readOnly = filesystem.workspace !== "write";
      const { dir, lease, limited } = message.workspace;
      if (!readOnly && limited) this.#workspace = new WorkspaceLease(message.invocation, lease, channel);
      preopens.push({ guestPath: "/workspace", hostDir: dir, readOnly, ...(this.#workspace ? { quota: this.#workspace } : {}) });
    }
    if (filesystem.scratch) {
      this.#scratch = join(boot.scratchRoot, String(message.invocation));
      mkdirSync(this.#scratch, { mode: 0o700 });
      preopens.push({ guestPath: "/scratch", hostDir: this.#scratch, readOnly: filesystem.scratch !== "write", quota: new LocalQuota(message.scratchQuota) });
    }
    this.filesystem = new GuestFilesystem({
      preopens,
      ...(message.secrets.length > 0 ? { secrets: new Map(message.secrets) } : {}),
      maxOpenFiles: boot.maxOpenFiles,
    });
  }

  get preopens() {
    return this.filesystem.preopens();
  }

  /**
   * Guest code of this invocation takes the thread. Called right before the guest starts or is
   * resumed: a resumption runs in the microtasks of the same macrotask (one host result or one
   * poll timer per macrotask), so no other guest can run in between.
   */
  resuming(): void {
    this.#claim.take(this.number, this.#deadlineMs);
  }

  /** The guest leaves the thread (it suspends on an async import, or it ended). */
  suspending(): void {
    this.#claim.leave(this.number);
    this.#yield();
  }

  hostCall(op: "callModel" | "dispatchTools", payload: string): Promise<string> {
    this.suspending();
    if (this.finished) return Promise.reject(abandoned());
    if (!this.#hostAllowed) return Promise.reject({ code: "host_unavailable", message: "this invocation has no host services" });
    const call = this.#nextCall++;
    return new Promise<string>((resolve, reject) => {
      this.#calls.set(call, { resolve, reject });
      this.#send({ type: "host-call", invocation: this.number, call, op, payload });
    });
  }

  /** Best effort (wit/env.wit): past the limits, events are dropped here and cost nothing further. */
  emit(payload: string): void {
    if (this.finished || !this.#hostAllowed) return;
    // UTF-16 length bounds the UTF-8 size from below: most oversized payloads are refused before measuring.
    if (this.#emits >= this.#maxEmits || payload.length > this.#maxEmitBytes || Buffer.byteLength(payload) > this.#maxEmitBytes) {
      this.#emitsDropped++;
      return;
    }
    this.#emits++;
    this.#send({ type: "emit", invocation: this.number, payload });
  }

  hostResult(message: HostResult): void {
    const pending = this.#calls.get(message.call);
    this.#calls.delete(message.call);
    if (!pending || this.finished) return;
    this.resuming();
    if (message.ok) pending.resolve(message.value);
    else pending.reject({ code: message.error.code, message: message.error.message });
  }

  /** Reports `timeout` at the deadline if the guest is still suspended then. */
  armDeadline(fuelUsed: () => number): void {
    this.#timer = setTimeout(
      () => this.finish({ outcome: "failure", code: "timeout", message: "the invocation passed its deadline", fuelUsed: fuelUsed() }),
      Math.max(0, this.#deadlineMs - Date.now()),
    );
  }

  /**
   * Sends the receipt, then takes everything away from the guest: its descriptors are closed, its
   * preopens and origins are gone, its fuel is negative (any guest code that still runs traps at
   * its next check), and a guest suspended on the host is resumed with an exception that unwinds
   * it, so its stack and memory can be collected. Its /scratch is removed.
   */
  finish(receipt: WorkerReceipt): void {
    if (this.finished) return;
    this.finished = true;
    this.suspending();
    clearTimeout(this.#timer);
    this.#onEnd();
    this.filesystem.revoke();
    const registered = this.registered;
    this.#send(
      { type: "receipt", invocation: this.number, receipt, workspaceGrowth: this.#workspace?.growth ?? 0, emitsDropped: this.#emitsDropped },
      registered && (() => registered.register.free(registered.slot)),
    );
    this.network = [];
    if (this.instance) this.instance.fuel.value = -1n;
    const pending = [...this.#calls.values()];
    this.#calls.clear();
    for (const call of pending) call.reject(abandoned());
    if (this.#scratch) void rm(this.#scratch, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  }
}

/** What unwinds an abandoned guest: an Error (not a failure record), so the glue rethrows it as a trap. */
function abandoned(): Error {
  return new Error("the invocation has ended");
}

/** The invocations running in this worker. */
export class Invocations {
  readonly #running = new Map<number, Invocation>();
  readonly #boot: WorkerBoot;
  readonly #components: Components;
  readonly #claim: ThreadClaim;
  readonly #channel: SyncChannel;
  readonly #register: StartRegister;
  readonly #send: Send;
  /** When the guest of the invocation started last first lets go of the thread. */
  #lastStart: Promise<void> = Promise.resolve();

  constructor(boot: WorkerBoot, components: Components, claim: ThreadClaim, channel: SyncChannel, register: StartRegister, send: Send) {
    this.#boot = boot;
    this.#components = components;
    this.#claim = claim;
    this.#channel = channel;
    this.#register = register;
    this.#send = send;
  }

  hostResult(message: HostResult): void {
    this.#running.get(message.invocation)?.hostResult(message);
  }

  /** The invocation whose guest holds the thread now: the caller of a blocking WASI call. */
  onThread(): Invocation | undefined {
    return this.#running.get(this.#claim.holder());
  }

  cancel(number: number): void {
    this.#running.get(number)?.finish({ outcome: "failure", code: "cancelled", message: "the invocation was cancelled" });
  }

  async start(message: InvokeMessage): Promise<void> {
    let invocation: Invocation;
    try {
      invocation = new Invocation(message, this.#boot, this.#claim, this.#channel, this.#send, () => this.#running.delete(message.invocation));
    } catch (error) {
      const receipt: WorkerReceipt = {
        outcome: "failure",
        code: "internal",
        message: `cannot set up the guest's filesystem: ${error instanceof Error ? error.message : String(error)}`,
      };
      this.#send({ type: "receipt", invocation: message.invocation, receipt, workspaceGrowth: 0, emitsDropped: 0 });
      return;
    }
    this.#running.set(message.invocation, invocation);
    const budget = BigInt(message.fuel);
    let instance: GuestInstance | undefined;
    invocation.armDeadline(() => (instance ? Number(budget - clampFuel(instance.fuel.value as bigint)) : 0));
    const component = await this.#components.get(message.component);
    if (invocation.finished) return; // cancelled, or past its deadline, while the component loaded
    if (!component) {
      invocation.finish({ outcome: "failure", code: "preparation_failed", message: `component ${message.component} is not loaded on this worker` });
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
    const spares = this.#components.spares;
    // One start at a time: the guest started before this one must have let go of the thread
    // (suspended or ended) before this one's start is recorded. Otherwise a guest that then
    // computes forever would leave a record behind for one that never ran.
    const previous = this.#lastStart;
    this.#lastStart = invocation.yielded;
    await previous;
    if (invocation.finished) return;
    // From here on the guest may run: the pool knows before it does.
    invocation.registered = { register: this.#register, slot: this.#register.record(message.invocation) };
    try {
      invocation.resuming();
      const spare = spares.take(component, invocation, budget);
      if (spare === "exhausted") {
        invocation.finish({
          outcome: "failure",
          code: "fuel_exhausted",
          message: `the guest used up its fuel (${budget} units) while starting`,
          fuelUsed: Number(budget),
        });
        return;
      }
      if (spare) {
        instance = spare;
      } else {
        const made = instantiate(component, budget, { scope: invocation });
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
      invocation.finish(classify(error, instance, budget, this.#boot.memoryPages));
    } finally {
      // Here the export has settled (or was never called): the guest cannot run again.
      invocation.suspending();
      if (instance) {
        instance.binding.scope = undefined;
        recycleMemories(component, instance);
      }
      spares.schedule(component);
    }
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
