import { spawn, type ChildProcess } from "node:child_process";
import { MALLOC_ENVIRONMENT } from "../../server/src/config/index.ts";

/** IPC protocol between the bench and a server child (see serve.ts for the child side). */
export type ToChild = { type: "stats" } | { type: "stop" };
export type FromChild = { type: "ready"; url: string } | { type: "stats"; stats: ChildStats } | { type: "failed"; message: string };

export interface ChildStats {
  rssBytes: number;
  /** Live heap after a full GC (the child runs with --expose-gc): growth here means retained objects. */
  heapUsedBytes: number;
  /** User + system CPU of the whole process (all threads, e.g. LevelDB's libuv pool) since it started. */
  cpuMicros: number;
}

export interface ServerChild {
  readonly url: string;
  readonly pid: number;
  /** Memory and CPU of the child, asked over IPC (portable, unlike /proc). */
  stats(): Promise<ChildStats>;
  /** Asks for a clean exit (so --cpu-prof can write its profile), SIGKILL if it takes too long. */
  stop(): Promise<void>;
}

export interface SpawnOptions {
  env?: Record<string, string>;
  /** Node flags for the child, e.g. --cpu-prof. */
  execArgv?: string[];
  startTimeoutMs?: number;
}

const live = new Set<ChildProcess>();
// Last resort: if the bench throws or exits early, no server outlives it. ('exit' handlers must be
// synchronous; kill() is.) The children also exit on their own when the IPC channel disconnects.
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Runs `node <script>` with an IPC channel and resolves once it reports its URL. */
export async function spawnServer(script: string, options: SpawnOptions = {}): Promise<ServerChild> {
  const child = spawn(process.execPath, ["--expose-gc", ...(options.execArgv ?? []), script], {
    // Every server child, baselines included, runs with the malloc settings the service's entry
    // point gives itself (server/src/main.ts).
    env: { PATH: process.env.PATH ?? "", ...MALLOC_ENVIRONMENT, ...options.env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const waiting: { resolve: (stats: ChildStats) => void; reject: (error: Error) => void }[] = [];
  void exited.then(() => {
    live.delete(child);
    // A server that dies mid-run must fail the suite, not leave it waiting for an answer.
    for (const w of waiting.splice(0)) w.reject(new Error(`${script}: exited (${child.exitCode ?? child.signalCode})`));
  });

  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  let timer: NodeJS.Timeout | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${script}: not ready within ${startTimeoutMs} ms`)), startTimeoutMs);
    child.on("message", (message: FromChild) => {
      if (message.type === "ready") resolve(message.url);
      else if (message.type === "failed") reject(new Error(`${script}: ${message.message}`));
      else waiting.shift()?.resolve(message.stats);
    });
    child.once("error", reject);
    void exited.then(() => reject(new Error(`${script}: exited (${child.exitCode ?? child.signalCode}) before it was ready`)));
  })
    .catch((error: unknown) => {
      child.kill("SIGKILL");
      throw error;
    })
    .finally(() => clearTimeout(timer));

  return {
    url,
    pid: child.pid!,
    stats: () =>
      new Promise<ChildStats>((resolve, reject) => {
        if (!child.connected) return reject(new Error(`${script}: not running`));
        waiting.push({ resolve, reject });
        child.send({ type: "stats" } satisfies ToChild);
      }),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.send({ type: "stop" } satisfies ToChild);
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The API key of the benchmark's one workspace. */
export const BENCH_API_KEY = "bench-key-0123456789abcdef";

export interface ServiceBesideBaseline {
  service: ServerChild;
  baseline: ServerChild;
}

/**
 * Runs `work` with the service and a bare baseline server, each in its own child process so that
 * client and servers use separate cores, and stops both afterwards, whatever happened.
 */
export async function withServiceBesideBaseline<T>(
  baselineScript: string,
  serviceExecArgv: string[],
  work: (servers: ServiceBesideBaseline) => Promise<T>,
): Promise<T> {
  const children: ServerChild[] = [];
  const started = (child: ServerChild) => (children.push(child), child);
  try {
    const [service, baseline] = await Promise.all([
      spawnServer(new URL("../servers/service.ts", import.meta.url).pathname, {
        // One workspace with the whole server: throughput, not its share.
        env: { SERVICE_API_KEYS: `bench=${BENCH_API_KEY}`, SERVICE_SHUTDOWN_GRACE_SECS: "1", SERVICE_WORKSPACE_REQUESTS_PER_SEC: "0" },
        execArgv: serviceExecArgv,
      }).then(started),
      spawnServer(baselineScript).then(started),
    ]);
    return await work({ service, baseline });
  } finally {
    await Promise.all(children.map((child) => child.stop()));
  }
}
