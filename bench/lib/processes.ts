// Memory and CPU of a set of processes (Linux /proc): what a pool of worker processes costs,
// counted with its own process. RSS counts shared pages (the Node binary's code, shared libraries) once
// per process; PSS divides each shared page among the processes that map it, so the PSS of a
// set adds up to what the set really holds.
import { readdirSync, readFileSync } from "node:fs";

export interface ProcessMemory {
  /** Sum of VmRSS. */
  rss: number;
  /** Sum of VmHWM (each process's own peak; the peaks need not have been at the same time). */
  peak: number;
  /** Sum of Pss. */
  pss: number;
}

/** `pid` and every process below it. */
export function processTree(pid: number): number[] {
  const pids = [pid];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      if (children) for (const child of children.split(" ")) pids.push(...processTree(Number(child)));
    }
  } catch {
    // gone meanwhile
  }
  return pids;
}

/** The memory of these processes, in bytes; a process that is gone counts nothing. */
export function memoryOf(pids: readonly number[]): ProcessMemory {
  const total: ProcessMemory = { rss: 0, peak: 0, pss: 0 };
  for (const pid of pids) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
      const kib = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? 0) * 1024;
      total.rss += kib(status, "VmRSS");
      total.peak += kib(status, "VmHWM");
      total.pss += kib(rollup, "Pss");
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** CPU (user + system) these processes have used, in microseconds; a process that is gone counts nothing. */
export function cpuOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  // USER_HZ is 100 on every Linux this runs on: 10 ms per tick.
  return ticks * 10_000;
}
