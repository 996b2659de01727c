import { once } from "node:events";
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { FromChild, ToChild } from "./child.ts";
import { cpuOf, memoryOf, processTree } from "./processes.ts";

export interface Served {
  url: string;
  close(): Promise<void>;
}

/**
 * Child side of spawnServer: start, report the URL over IPC, answer stats queries, exit on stop or
 * when the parent goes away. Stats count the processes the server started too (the service's
 * worker processes): their CPU and RSS are the server's.
 */
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
      const descendants = processTree(process.pid).slice(1);
      const descendantsCpu = cpuOf(descendants);
      globalThis.gc?.();
      const memory = process.memoryUsage();
      const rssBytes = memory.rss + memoryOf(descendants).rss;
      send({ type: "stats", stats: { rssBytes, heapUsedBytes: memory.heapUsed, cpuMicros: cpu.user + cpu.system + descendantsCpu } });
    }
    // process.exit (not a signal) so that --cpu-prof still writes its profile.
    else if (message.type === "stop") served.close().finally(() => process.exit(0));
  });
  send({ type: "ready", url: served.url });
}

/** Listens on a loopback port; `close` ends the server's HTTP/2 sessions too, so it does not wait on idle clients. */
export function listenHttp2(server: http2.Http2Server): Promise<Served> {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return listen(server, () => {
    for (const session of sessions) session.close();
  });
}

/** Listens on a loopback port; `close` drops the server's keep-alive connections too, so it does not wait on idle clients. */
export function listenHttp1(server: http.Server): Promise<Served> {
  return listen(server, () => server.closeAllConnections());
}

async function listen(server: http.Server | http2.Http2Server, dropConnections: () => void): Promise<Served> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      dropConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
