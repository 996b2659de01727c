import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { afterAll } from "vitest";

const MAIN = path.resolve(import.meta.dirname, "../../src/main.ts");

/**
 * Services still running when their file's tests are over: a test that failed before its own
 * kill would otherwise leave its server running after the suite. This module is evaluated once
 * per test file, so each file kills what it started.
 */
const running = new Set<ChildProcess>();
afterAll(() => {
  for (const child of running) child.kill("SIGKILL");
});

function tracked(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * Runs the real entry point (`node server/src/main.ts`) and waits for its listening line, or with
 * `until: "port-open"` for the line it writes once its port is open, while it is still starting.
 */
export async function spawnService(env: Record<string, string>, { until = "listening" }: { until?: "listening" | "port-open" } = {}): Promise<ServiceProcess> {
  const line = until === "listening" ? /listening on (\S+)/ : /starting on (\S+)/;
  const child = tracked(
    spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? "", SERVICE_LISTEN: "127.0.0.1:0", SERVICE_LOG_REQUESTS: "false", ...sandboxFromEnvironment(), ...env },
      stdio: ["ignore", "ignore", "pipe"],
    }),
  );
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = line.exec(stderr);
      if (match?.[1]) resolve(match[1]);
    });
    exited.then((code) => reject(new Error(`service exited with ${code} before listening:\n${stderr}`)));
  });
  return { child, url, stderr: () => stderr, exited };
}

/** Resolves once the service has written `text` to its stderr (woken by its output, not a clock). */
export function whenStderrHas(service: ServiceProcess, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!service.stderr().includes(text)) return false;
      service.child.stderr!.off("data", onData);
      resolve();
      return true;
    };
    // Listening after the helper's own listener: stderr() already holds this chunk when it runs.
    const onData = () => void check();
    service.child.stderr!.on("data", onData);
    check();
  });
}

/** Runs the entry point expecting it to stop; returns exit code and stderr. */
export async function runUntilExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = tracked(
    spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? "", ...sandboxFromEnvironment(), ...env }, stdio: ["ignore", "ignore", "pipe"] }),
  );
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, stderr };
}

/**
 * SERVICE_ENV_SANDBOX from the test process's environment, when set: where bubblewrap cannot
 * start (a worktree whose node_modules are symlinks out of the sandbox's view), tests run with
 * SERVICE_ENV_SANDBOX=off without each file spelling it.
 */
export function sandboxFromEnvironment(): Record<string, string> {
  const sandbox = process.env.SERVICE_ENV_SANDBOX;
  return sandbox ? { SERVICE_ENV_SANDBOX: sandbox } : {};
}
