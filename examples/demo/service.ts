import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as path from "node:path";

const MAIN = path.resolve(import.meta.dirname, "../../server/src/main.ts");
/** Startup admits nothing here, so it takes seconds; longer means something is wrong. */
const STARTUP_TIMEOUT_MS = 60_000;
/** How long a stopping service may drain before it is killed. */
const STOP_TIMEOUT_MS = 10_000;

export interface ServiceSettings {
  dataDir: string;
  /** The service environment's workspaces; also the one root the filesystem allow-list grants. */
  workspaceRoot: string;
  anthropicBaseUrl: string;
  openaiBaseUrl: string;
}

export interface ServiceProcess {
  url: string;
  apiKey: string;
  /** What it wrote to stderr so far: where to look when the demo fails. */
  output(): string;
  /** SIGTERM (the service drains), then SIGKILL if it has not exited in time. */
  stop(): Promise<void>;
}

/**
 * Runs the real entry point, `node server/src/main.ts`, as `npm start` does, on an ephemeral
 * loopback port, and waits for the line that says where it listens. Its environment holds only
 * these settings, so a SERVICE_* variable of the caller's shell cannot change the demo.
 */
export async function startServiceProcess(settings: ServiceSettings): Promise<ServiceProcess> {
  const apiKey = `demo-${randomUUID()}`;
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? "",
      SERVICE_LISTEN: "127.0.0.1:0",
      SERVICE_DATA_DIR: settings.dataDir,
      SERVICE_API_KEYS: `demo=${apiKey}`,
      SERVICE_LOG_REQUESTS: "false",
      SERVICE_ANTHROPIC_BASE_URL: settings.anthropicBaseUrl,
      SERVICE_OPENAI_BASE_URL: settings.openaiBaseUrl,
      SERVICE_ENV_WORKSPACE_ROOT: settings.workspaceRoot,
      SERVICE_ENV_FILESYSTEM_ALLOW: settings.workspaceRoot,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  // Read the service's output to its end, so that a full pipe never blocks it.
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };
  try {
    return { url: await listeningUrl(child.stderr!, () => output, exited), apiKey, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The URL of the service's "listening on <url>" line, or its output so far when that never comes. */
function listeningUrl(stderr: NodeJS.ReadableStream, output: () => string, exited: Promise<number | null>): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the service did not listen within ${STARTUP_TIMEOUT_MS / 1000} s:\n${output().trim()}`)),
      STARTUP_TIMEOUT_MS,
    );
    const onData = () => {
      const match = /listening on (\S+)/.exec(output());
      if (!match?.[1]) return;
      clearTimeout(timer);
      stderr.off("data", onData);
      resolve(match[1]);
    };
    stderr.on("data", onData);
    // Once it listens, its exit (when the demo stops it) settles nothing.
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the service exited with ${code} before listening:\n${output().trim()}`));
    });
  });
}
