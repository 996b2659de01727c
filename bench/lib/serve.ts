import type { FromChild, ToChild } from "./child.ts";

export interface Served {
  url: string;
  close(): Promise<void>;
}

/** Child side of spawnServer: start, report the URL over IPC, answer stats queries, exit on stop or when the parent goes away. */
export async function serveOverIpc(start: () => Promise<Served>): Promise<void> {
  if (!process.send) throw new Error("run me through bench/lib/child.ts spawnServer (needs an IPC channel)");
  const send = (message: FromChild) => process.send!(message);
  // An orphaned server would keep a core busy and a port open; the channel closes when the parent dies.
  process.on("disconnect", () => process.exit(0));
  let served: Served;
  try {
    served = await start();
  } catch (error) {
    send({ type: "failed", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }
  process.on("message", (message: ToChild) => {
    if (message.type === "stats") {
      const cpu = process.cpuUsage();
      globalThis.gc?.();
      const memory = process.memoryUsage();
      send({ type: "stats", stats: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed, cpuMicros: cpu.user + cpu.system } });
    }
    // process.exit (not a signal) so that --cpu-prof still writes its profile.
    else if (message.type === "stop") served.close().finally(() => process.exit(0));
  });
  send({ type: "ready", url: served.url });
}
