import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { MALLOC_ENVIRONMENT } from "../../config/process-memory.ts";
import { bubblewrapArguments, launchCommand, SANDBOX_EGRESS_SOCKET } from "./bubblewrap.ts";
import { Egress } from "./egress.ts";
import type { FromWorker, LeaseRequest, SyncNote, ToWorker, WorkerBoot } from "./protocol.ts";
import { readStartRegister } from "./start-register.ts";

const WORKER_MAIN = new URL("../worker/main.ts", import.meta.url).pathname;
const EGRESS_PRELOAD = new URL("../worker/egress-preload.ts", import.meta.url).pathname;
/** What is kept of a worker's stderr: enough to say why it failed to start. */
export const STDERR_TAIL = 2048;

/**
 * The environment a process of the workers' runtime starts with (the compile cache's filler too:
 * Node keys its cache by what changes compiled code). The egress preload goes in NODE_OPTIONS,
 * not the command line: the WASI shim starts its I/O thread with an empty execArgv, and only
 * NODE_OPTIONS preloads reach it there.
 */
export function runtimeEnvironment(compileCache: string): Record<string, string> {
  return { ...MALLOC_ENVIRONMENT, NODE_OPTIONS: `--import=${EGRESS_PRELOAD}`, NODE_COMPILE_CACHE: compileCache };
}

/** Node running `script` as the workers' runtime does. */
export function nodeCommand(script: string): string[] {
  return [process.execPath, "--disable-warning=ExperimentalWarning", script];
}

export interface WorkerProcessOptions {
  /** Run inside bubblewrap (SERVICE_ENV_SANDBOX=on), or as a plain child process. */
  sandbox: boolean;
  boot: Omit<WorkerBoot, "scratchRoot">;
  /** This worker's own directory (its /scratch directories live below); removed when it exits. */
  directory: string;
  /** Its egress socket (a short path: Unix socket paths are limited to 107 bytes). */
  egressSocket: string;
  /** Prepared components of the current toolchain (read-only in the sandbox). */
  prepared: string;
  /** The compile cache of the workers' own code, filled (compile-cache.ts; read-only in the sandbox). */
  compileCache: string;
  workspaceRoot: string;
}

export interface WorkerProcessEvents {
  message(message: FromWorker): void;
  /** The worker's watchdog stopped it: this invocation's guest computed past its deadline. */
  overran(invocation: number): void;
  /** A guest has held the worker's thread for a while (true), or let it go (false). */
  busy(busy: boolean): void;
  /** A lease request of an invocation: answers the bytes granted, synchronously. */
  lease(request: LeaseRequest): number;
  /** Network origins granted to the invocations in flight on this worker (its egress allows them). */
  granted(): readonly string[];
  /** The process exited (or failed to start); `stderr` is the tail of what it wrote. */
  exit(description: string, stderr: string): void;
}

/**
 * One OS process of the pool and its channels: Node's IPC channel (structured clone), the
 * watchdog's report descriptor, the lease socket and the start register (start-register.ts), its
 * egress proxy, its scratch directory. Messages sent before the process is spawned wait, in order.
 */
export class WorkerProcess {
  readonly #options: WorkerProcessOptions;
  readonly #events: WorkerProcessEvents;
  #child: ChildProcess | undefined;
  /** The start register's descriptor (the pool's end), until the process is gone. */
  #register: number | undefined;
  /** What the register held when the process was gone: nothing is written to it after. */
  #startedAtExit: ReadonlySet<number> | undefined;
  #egress: Egress | undefined;
  readonly #queue: ToWorker[] = [];
  #stderr = "";
  #gone = false;
  /** The sandbox's (or the plain worker's) process id, as the host sees it. */
  pid: number | undefined;

  constructor(options: WorkerProcessOptions, events: WorkerProcessEvents) {
    this.#options = options;
    this.#events = events;
    void this.#start().catch((error: unknown) => this.#exited(`could not be started: ${error instanceof Error ? error.message : String(error)}`));
  }

  send(message: ToWorker): void {
    if (this.#gone) return;
    if (!this.#child) {
      this.#queue.push(message);
      return;
    }
    this.#child.send(message);
  }

  /**
   * The invocations whose guest started on this worker, as its start register says (with numbers
   * of invocations long settled among them). Once the process is gone, complete: a number that is
   * not there is an invocation that never ran.
   */
  started(): ReadonlySet<number> {
    if (this.#startedAtExit) return this.#startedAtExit;
    return this.#register === undefined ? new Set() : readStartRegister(this.#register);
  }

  /** Closes the egress tunnels that no invocation in flight grants any more. */
  revokeEgress(): void {
    this.#egress?.revoke();
  }

  /**
   * Stops the process at once (SIGKILL: a computing guest does not get to run another
   * instruction), with its whole process group: bubblewrap's child, which becomes the sandbox's
   * init, waits for bubblewrap to set up its user namespace before it binds its life to
   * bubblewrap's; killed alone in that window, bubblewrap would leave it waiting for ever with the
   * worker's pipes open, and the worker's end would never be seen. Every process of the sandbox
   * stays in the group (bubblewrap runs without `--new-session`, whose setsid() would take its
   * child out of it), and everything in the sandbox dies with its init.
   */
  kill(): void {
    if (!this.#child) {
      this.#exited("was stopped before it started");
      return;
    }
    if (this.#gone || this.#child.pid === undefined) return;
    try {
      process.kill(-this.#child.pid, "SIGKILL");
    } catch {
      // the group is gone already
    }
  }

  async #start(): Promise<void> {
    const { directory } = this.#options;
    const scratchRoot = join(directory, "scratch");
    mkdirSync(scratchRoot, { recursive: true, mode: 0o700 });
    // Not below scratchRoot: the sandbox shows the worker that directory, and this file only by its descriptor.
    this.#register = openSync(join(directory, "started"), "w+", 0o600);
    const egress = await Egress.listen(this.#options.egressSocket, () => this.#events.granted());
    if (this.#gone) {
      // Stopped while the proxy started listening: #exited found no proxy to close.
      await egress.close().catch(() => undefined);
      return;
    }
    this.#egress = egress;
    const boot: WorkerBoot = { ...this.#options.boot, scratchRoot };
    const egressPath = this.#options.sandbox ? SANDBOX_EGRESS_SOCKET : this.#options.egressSocket;
    const { compileCache, prepared, workspaceRoot, egressSocket } = this.#options;
    const env = { ...runtimeEnvironment(compileCache), SKILLENV_WORKER: JSON.stringify(boot), SKILLENV_EGRESS: egressPath };
    const [command, ...args] = launchCommand(this.#options.sandbox, nodeCommand(WORKER_MAIN), (node) =>
      bubblewrapArguments({ prepared, compileCache, workspaceRoot, scratchRoot, egressSocket }, node),
    );
    // 0: nothing; 1: guests' output, discarded; 2: kept (tail) to explain a failed start;
    // 3: IPC; 4: the watchdog's report; 5: the synchronous channel (lease requests); 6: the start
    // register (a file).
    // Detached: the worker leads a process group of its own, which kill() stops as a whole (see there).
    const child = spawn(command!, args, {
      stdio: ["ignore", "ignore", "pipe", "ipc", "pipe", "pipe", this.#register],
      serialization: "advanced",
      env,
      detached: true,
    });
    this.#child = child;
    this.pid = child.pid;
    // A failure to spawn (no bubblewrap, say) is an error without a process; once there is one,
    // an error is the IPC channel failing as it goes, and `close` follows.
    child.on("error", (error) => {
      if (child.pid === undefined) this.#exited(`could not be started: ${error.message}`);
    });
    // `close`, not `exit`: it comes after the process's last messages and stderr were read.
    child.on("close", (code, signal) => this.#exited(signal ? `was stopped by ${signal}` : `exited with code ${code}`));
    child.on("message", (message: FromWorker) => this.#events.message(message));
    const stdio = child.stdio as unknown as (Readable | null)[];
    stdio[2]!.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    readLines(stdio[4]!, (line) => {
      if (line === "busy" || line === "free") {
        this.#events.busy(line === "busy");
        return;
      }
      const invocation = Number(/^overran (\d+)$/.exec(line)?.[1]);
      if (Number.isSafeInteger(invocation) && invocation > 0) this.#events.overran(invocation);
    });
    const channel = stdio[5] as Readable & Writable;
    readLines(channel, (line) => {
      let note: SyncNote | undefined;
      try {
        note = JSON.parse(line) as SyncNote;
      } catch {
        // a malformed note says nothing; a lease request among them is granted nothing
      }
      const valid = note?.type === "lease" && Number.isSafeInteger(note.invocation) && Number.isFinite(note.bytes) && note.bytes > 0;
      channel.write(`${JSON.stringify({ granted: valid ? this.#events.lease(note as LeaseRequest) : 0 })}\n`);
    });
    for (const message of this.#queue.splice(0)) child.send(message);
  }

  #exited(description: string): void {
    if (this.#gone) return;
    this.#gone = true;
    this.#queue.length = 0;
    if (this.#register !== undefined) {
      // Read before the directory goes, and before the pool settles what was in flight.
      this.#startedAtExit = this.#child ? readStartRegister(this.#register) : new Set();
      closeSync(this.#register);
      this.#register = undefined;
    }
    const egress = this.#egress;
    void egress?.close().catch(() => undefined);
    void rm(this.#options.directory, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }).catch(() => undefined);
    this.#events.exit(description, this.#stderr);
  }
}

/** Calls `onLine` with each newline-terminated line of `stream` (lines longer than 64 KiB end the stream). */
function readLines(stream: Readable, onLine: (line: string) => void): void {
  let buffered = "";
  stream.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      onLine(line);
    }
    if (buffered.length > 65536) stream.destroy();
  });
  stream.on("error", () => undefined);
}
