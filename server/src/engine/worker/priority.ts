// How a worker process yields the CPU to the server (docs/environments.md, "Guests compute at a
// lower CPU priority than the server"): every thread but its watchdog's, and its session's
// scheduling group, at the pool's nice value.
import { readdirSync, writeFileSync } from "node:fs";
import { setPriority } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";

/** The kernel's interval between two autogroup changes by unprivileged processes (HZ / 10), and how often a worker tries. */
const AUTOGROUP_RETRY_MS = 110;
const AUTOGROUP_ATTEMPTS = 20;

/**
 * Sets `niceness` on every thread of this process but `keep` (the watchdog's; this thread's alone
 * when its id is unknown), and on the process's autogroup. A nice value is per thread on Linux
 * and only raised without privilege, so the watchdog's thread keeps the server's value, to stop an
 * overrunning guest on time.
 */
export async function yieldCpu(niceness: number, keep: number | undefined): Promise<void> {
  setPriority(niceness);
  if (keep !== undefined) {
    for (const entry of readdirSync("/proc/self/task")) {
      const thread = Number(entry);
      if (thread === keep || thread === process.pid) continue;
      try {
        setPriority(thread, niceness);
      } catch {
        // A thread that ended meanwhile.
      }
    }
  }
  await lowerAutogroup(niceness);
}

/**
 * Where the kernel groups processes by session for scheduling (autogroup, on by default in most
 * distributions' kernels), CPU time is first shared equally between sessions, and a thread's nice
 * value counts only within its own. A worker leads a session of its own (the pool starts it
 * detached, to stop it by its process group), so its threads' nice values alone would leave it
 * an equal share beside the server: its session's nice value is raised too. The kernel takes
 * that write from an unprivileged process at most once per 100 ms over all processes (EAGAIN
 * otherwise: workers starting together), so a refused one is tried again, a few times. Without
 * autogroup (no such file), there is nothing to do.
 */
async function lowerAutogroup(niceness: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      writeFileSync("/proc/self/autogroup", String(niceness));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN" || attempt === AUTOGROUP_ATTEMPTS) return;
    }
    await sleep(AUTOGROUP_RETRY_MS);
  }
}
