// The watchdog of a worker process (see ThreadClaim): sleeps until a guest takes the thread,
// then until that guest's deadline plus the grace; if the same guest still holds the thread
// then, it is computing past its deadline (a loop, a blocking call), and nothing but stopping the
// process stops it. The watchdog names the invocation to the pool on its own descriptor, then
// kills the process: the pool gives that invocation `timeout` and the others in flight `unknown`.
import { writeSync } from "node:fs";
import { workerData } from "node:worker_threads";

const { holder, deadline, graceMs, reportFd } = workerData as { holder: SharedArrayBuffer; deadline: SharedArrayBuffer; graceMs: number; reportFd: number };
const claimed = new Int32Array(holder);
const until = new Float64Array(deadline);

for (;;) {
  const invocation = Atomics.load(claimed, 0);
  if (invocation === 0) {
    Atomics.wait(claimed, 0, 0);
    continue;
  }
  const wait = until[0]! + graceMs - Date.now();
  // Woken early when the guest leaves the thread (or another takes it).
  if (wait > 0) {
    Atomics.wait(claimed, 0, invocation, wait);
    continue;
  }
  if (Atomics.load(claimed, 0) !== invocation) continue;
  try {
    writeSync(reportFd, `${invocation}\n`);
  } finally {
    process.kill(process.pid, "SIGKILL");
  }
}
