/**
 * Runs one command as the leader of its own process group, so that stopping it (deadline,
 * cancellation) and cleaning up after it reach everything it started: the group is killed with
 * SIGKILL. Under bubblewrap the group holds bwrap itself; killing it ends the sandbox's PID
 * namespace and with it every process inside.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as os from "node:os";
import type { Readable } from "node:stream";
import type { Launch } from "./sandbox.ts";

/** Node fires a longer timer at once (after a warning); 24.8 days is as good as no limit here. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

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
    const child = spawn(launch.file, launch.args, { cwd: launch.cwd, env: launch.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const stdout = capture(child.stdout, limits.outputLimit);
    const stderr = capture(child.stderr, limits.outputLimit);
    let stopped: StopReason | undefined;
    const stop = (reason: StopReason): void => {
      stopped ??= reason;
      killGroup(child);
      // A process that left the group (setsid) may still hold the pipes open; stop waiting for them.
      child.stdout.destroy();
      child.stderr.destroy();
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
      resolve({ stopped, exitCode: code ?? 128 + (signal ? os.constants.signals[signal] : 0), stdout: stdout.text(), stderr: stderr.text(), truncated });
    });
  });
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
