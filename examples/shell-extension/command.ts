/**
 * Runs one command as the leader of its own process group, so that stopping it (deadline,
 * cancellation) and cleaning up after it reach everything it started: the group is killed with
 * SIGKILL. Under bubblewrap the group holds bwrap itself; when bwrap ends, the sandbox's first
 * process dies with it (--die-with-parent) and with that every process of the sandbox's PID
 * namespace, a few milliseconds later: the outcome waits for that too, so that when a command's
 * outcome is known none of its processes runs any more (a Stage relies on it, lock.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import type { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import type { Launch } from "./sandbox.ts";

/** Node fires a longer timer at once (after a warning); 24.8 days is as good as no limit here. */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;

export type StopReason = "timeout" | "cancelled";

export interface CommandLimits {
  /** Bytes kept of each of stdout and stderr; the rest is dropped. */
  outputLimit: number;
  /** Undefined: no limit. */
  timeoutMs: number | undefined;
  signal: AbortSignal;
}

export interface CommandOutcome {
  /** Why the command was killed; undefined when it ended by itself. */
  stopped: StopReason | undefined;
  /** As a shell reports it: 128 + the signal's number when a signal ended the command. */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** Whether output beyond outputLimit was dropped. */
  truncated: boolean;
}

export function runCommand(launch: Launch, limits: CommandLimits): Promise<CommandOutcome> {
  return new Promise((resolve, reject) => {
    // fd 3 carries bwrap's report; "ignore" there gives the child no fd 3, as a three-entry stdio would.
    const child = spawn(launch.file, launch.args, {
      cwd: launch.cwd,
      env: launch.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe", launch.reportsSandbox ? "pipe" : "ignore"],
    });
    const stdout = capture(child.stdout!, limits.outputLimit);
    const stderr = capture(child.stderr!, limits.outputLimit);
    // bwrap closes it once it has written; nothing in the sandbox holds it.
    const sandbox = launch.reportsSandbox ? sandboxOf(child.stdio[3] as Readable) : undefined;
    let stopped: StopReason | undefined;
    const stop = (reason: StopReason): void => {
      stopped ??= reason;
      killGroup(child);
      // A process that left the group (setsid) may still hold the pipes open; stop waiting for them.
      child.stdout!.destroy();
      child.stderr!.destroy();
    };
    const timer = limits.timeoutMs === undefined ? undefined : setTimeout(() => stop("timeout"), Math.min(limits.timeoutMs, LONGEST_TIMER_MS));
    const onAbort = (): void => stop("cancelled");
    limits.signal.addEventListener("abort", onAbort);
    if (limits.signal.aborted) onAbort();
    const cleanUp = (): void => {
      clearTimeout(timer);
      limits.signal.removeEventListener("abort", onAbort);
    };
    // Nothing the command started in the background outlives it.
    child.once("exit", () => killGroup(child));
    child.once("error", (error) => {
      cleanUp();
      reject(error);
    });
    child.once("close", (code, signal) => {
      cleanUp();
      const truncated = stdout.truncated() || stderr.truncated();
      const outcome = { stopped, exitCode: code ?? 128 + (signal ? os.constants.signals[signal] : 0), stdout: stdout.text(), stderr: stderr.text(), truncated };
      void (sandbox?.ended() ?? Promise.resolve()).then(() => resolve(outcome));
    });
  });
}

/** How often, and how long at most, the end of a sandbox is waited for once bwrap has ended. */
const SANDBOX_POLL_MS = 5;
const SANDBOX_WAIT_MS = 10_000;

interface SandboxWatch {
  /** Settles once no process of the sandbox runs; to be called once bwrap has ended. */
  ended(): Promise<void>;
}

/**
 * bwrap's `--info-fd` report names the sandbox's first process (its host PID, `child-pid`) and its
 * PID namespace. That process exits last: the kernel kills and reaps every other process of the
 * namespace before it becomes a zombie. So the sandbox has ended when that PID is gone, a zombie,
 * or another process's (in another namespace: the PID was reused).
 */
function sandboxOf(info: Readable): SandboxWatch {
  let text = "";
  info.on("data", (chunk: Buffer) => (text += chunk.toString()));
  const reported = new Promise<{ pid: number; namespace: string } | undefined>((resolve) => {
    info.once("close", () => {
      try {
        const report = JSON.parse(text) as { "child-pid"?: unknown; "pid-namespace"?: unknown };
        const pid = report["child-pid"];
        const namespace = report["pid-namespace"];
        resolve(typeof pid === "number" && typeof namespace === "number" ? { pid, namespace: `pid:[${namespace}]` } : undefined);
      } catch {
        // bwrap died before it reported: it had not let the sandbox run.
        resolve(undefined);
      }
    });
  });
  return {
    async ended() {
      const sandbox = await reported;
      if (sandbox === undefined) return;
      const giveUpAt = Date.now() + SANDBOX_WAIT_MS;
      while (sandboxRuns(sandbox.pid, sandbox.namespace)) {
        // --die-with-parent has already sent it SIGKILL, unless bwrap died before arming it.
        killProcess(sandbox.pid);
        if (Date.now() > giveUpAt) {
          console.error(`shell-extension: the sandbox of process ${sandbox.pid} is still running ${SANDBOX_WAIT_MS} ms after bwrap ended`);
          return;
        }
        await sleep(SANDBOX_POLL_MS);
      }
    },
  };
}

/** Whether `pid` is a live process (not a zombie) in the PID namespace `namespace` ("pid:[<inode>]"). */
function sandboxRuns(pid: number, namespace: string): boolean {
  try {
    if (fs.readlinkSync(`/proc/${pid}/ns/pid`) !== namespace) return false;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // "<pid> (<name>) <state> ...": the name may hold spaces and parentheses.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    // ENOENT: reaped.
    return false;
  }
}

function killProcess(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // ESRCH: it is gone.
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // ESRCH: the group is already gone.
  }
}

interface Captured {
  text(): string;
  truncated(): boolean;
}

/** Keeps the first `limit` bytes of a stream and counts whether more came. */
function capture(stream: Readable, limit: number): Captured {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = false;
  stream.on("data", (chunk: Buffer) => {
    const room = limit - kept;
    if (chunk.length > room) dropped = true;
    if (room <= 0) return;
    const part = chunk.subarray(0, room);
    chunks.push(part);
    kept += part.length;
  });
  return { text: () => Buffer.concat(chunks).toString("utf8"), truncated: () => dropped };
}
