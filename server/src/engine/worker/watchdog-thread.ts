// The watchdog of a worker process (see ThreadClaim). Every POLL_MS it looks at which guest holds
// the thread, since when and until when it may, and tells the pool, one line each on its own
// descriptor:
// - `busy`, once a guest has held the thread for BUSY_MS (it computes: the pool sends new work to
//   other workers while it can), and `free` once it lets go;
// - `overran <invocation>`, when a guest holds it past its deadline plus the grace: it computes
//   past its deadline (a loop, a blocking call), and nothing but stopping the process stops it, so
//   the watchdog kills the process after saying so. The pool gives that invocation `timeout` and
//   the others in flight `unknown` (or `unavailable` where they had not started).
// A guest is therefore stopped between grace and grace + POLL_MS after its deadline.
import { readlinkSync, writeSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { NOT_THE_WATCHDOG } from "./entries.ts";

if (!parentPort || !workerData) throw new Error(NOT_THE_WATCHDOG);
const { holder, times, graceMs, reportFd } = workerData as { holder: SharedArrayBuffer; times: SharedArrayBuffer; graceMs: number; reportFd: number };
const claimed = new Int32Array(holder);
/** [0]: the holder's deadline, [1]: when it took the thread. */
const at = new Float64Array(times);
/** How often the watchdog looks. */
const POLL_MS = 20;
/** How long a guest holds the thread before its worker counts as busy. */
const BUSY_MS = 50;
const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** The hold reported busy (its start time), if one is. */
let busySince: number | undefined;

// This thread's id ("<pid>/task/<tid>"), so that the worker lowers every thread's priority but this one.
parentPort.postMessage(threadId());

function threadId(): number | undefined {
  try {
    return Number(readlinkSync("/proc/thread-self").split("/").at(-1));
  } catch {
    return undefined;
  }
}

for (;;) {
  Atomics.wait(sleeper, 0, 0, POLL_MS);
  const invocation = Atomics.load(claimed, 0);
  const [deadline, since] = [at[0]!, at[1]!];
  // Still the same holder after reading its times: they are its own (take writes them first).
  const same = invocation !== 0 && Atomics.load(claimed, 0) === invocation;
  const now = Date.now();
  if (busySince !== undefined && (!same || since !== busySince)) {
    busySince = undefined;
    writeSync(reportFd, "free\n");
  }
  if (!same) continue;
  if (busySince === undefined && now - since >= BUSY_MS) {
    busySince = since;
    writeSync(reportFd, "busy\n");
  }
  if (deadline + graceMs > now) continue;
  try {
    writeSync(reportFd, `overran ${invocation}\n`);
  } finally {
    process.kill(process.pid, "SIGKILL");
  }
}
