import * as net from "node:net";

/**
 * A loopback port nothing listens on now (free a moment ago): for a server the test starts
 * there later (PostgreSQL, Prometheus, an extension that is down at first, a service restarted
 * on the same address). Another process may take it meanwhile; callers that can, retry.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
