// An OTLP/HTTP collector that keeps nothing: it drains each POST /v1/traces and answers an empty
// ExportTraceServiceResponse (an empty protobuf body), so that a traced service's exports cost
// the service what they cost in production, and nothing else runs on its core.
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { serveOverIpc } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const server = http.createServer({ keepAlive: true }, (req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf", "content-length": 0 }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
});
