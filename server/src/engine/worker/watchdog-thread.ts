// The watchdog of a worker process (see ThreadClaim): looks every POLL_MS at which guest holds the
// thread and until when it may; if one holds it past its deadline plus the grace, it is computing
// past its deadline (a loop, a blocking call), and nothing but stopping the process stops it. The
// watchdog names the invocation to the pool on its own descriptor, then kills the process: the
// pool gives that invocation `timeout` and the others in flight `unknown`. A guest is therefore
// stopped between grace and grace + POLL_MS after its deadline.
import { writeSync } from "node:fs";
import { workerData } from "node:worker_threads";

const { holder, deadline, graceMs, reportFd } = workerData as { holder: SharedArrayBuffer; deadline: SharedArrayBuffer; graceMs: number; reportFd: number };
const claimed = new Int32Array(holder);
const until = new Float64Array(deadline);
/** How often the watchdog looks. */
const POLL_MS = 20;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

for (;;) {
  Atomics.wait(sleeper, 0, 0, POLL_MS);
  const invocation = Atomics.load(claimed, 0);
  if (invocation === 0 || until[0]! + graceMs > Date.now()) continue;
  // Still the same holder after reading its deadline: the deadline is its own (take writes it first).
  if (Atomics.load(claimed, 0) !== invocation) continue;
  try {
    writeSync(reportFd, `${invocation}\n`);
  } finally {
    process.kill(process.pid, "SIGKILL");
  }
}
