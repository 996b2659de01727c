import { Worker } from "node:worker_threads";

/**
 * Which invocation's guest code is on this process's thread, since when, and until when it may
 * be: shared with the watchdog thread (watchdog-thread.ts), which tells the pool when a guest has
 * held the thread long enough that new work is better sent elsewhere, and stops the process when
 * a guest computes past its deadline (a guest that computes cannot be interrupted otherwise: its
 * thread is this process's only JavaScript thread). Written when a guest starts or resumes,
 * cleared when it suspends or ends.
 */
export class ThreadClaim {
  /** [0]: the invocation on the thread (0: none). */
  readonly #holder: Int32Array;
  /** [0]: its deadline, [1]: when it took the thread, in Unix milliseconds. */
  readonly #times: Float64Array;
  /** The watchdog's thread id, once it runs (undefined where the system does not say: not Linux). */
  readonly watchdogThread: Promise<number | undefined>;

  constructor(graceMs: number, reportFd: number) {
    const holder = new SharedArrayBuffer(4);
    const times = new SharedArrayBuffer(16);
    this.#holder = new Int32Array(holder);
    this.#times = new Float64Array(times);
    // Without the egress socket: the watchdog makes no connection (egress-preload.ts).
    const { SKILLENV_EGRESS: _, ...env } = process.env;
    const watchdog = new Worker(new URL("./watchdog-thread.ts", import.meta.url), { workerData: { holder, times, graceMs, reportFd }, env });
    // The watchdog never ends on its own; it must not keep the process alive when it should exit.
    watchdog.unref();
    // No watchdog, no worker: a guest computing past its deadline could not be stopped. The pool replaces the process.
    watchdog.on("error", (error) => {
      process.stderr.write(`the worker's watchdog thread failed: ${error.message}\n`);
      process.exit(1);
    });
    this.watchdogThread = new Promise((resolve) => watchdog.once("message", (tid: number | undefined) => resolve(tid)));
  }

  /**
   * The guest of `invocation` takes the thread; its deadline is written first, so the watchdog
   * never pairs it with another's. Plain stores, no wake-up: the watchdog looks on its own
   * schedule (a wake-up per take and leave cost more CPU than the rest of a small invocation).
   */
  take(invocation: number, deadlineMs: number): void {
    this.#times[0] = deadlineMs;
    this.#times[1] = Date.now();
    Atomics.store(this.#holder, 0, invocation);
  }

  /** The invocation whose guest holds the thread now (0: none). */
  holder(): number {
    return Atomics.load(this.#holder, 0);
  }

  /** The guest of `invocation` leaves the thread (it suspends on an async import, or it ended). */
  leave(invocation: number): void {
    Atomics.compareExchange(this.#holder, 0, invocation, 0);
  }
}
