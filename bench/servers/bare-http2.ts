// The floor: a plaintext node:http2 server on the core stream API (no compat layer, no routing,
// no protobuf) that drains a POST and answers a small fixed body. Same process model as the service.
import * as http2 from "node:http2";
import { listenHttp2, serveOverIpc } from "../lib/serve.ts";

// About the size of a Presign dedup-hit answer, so the baseline moves comparable bytes.
const BODY = Buffer.from(JSON.stringify({ exists: true, sha256: "0".repeat(64) }));

await serveOverIpc(async () => {
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("data", () => {});
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/octet-stream", "content-length": BODY.byteLength });
      stream.end(BODY);
    });
    stream.on("error", () => stream.destroy());
  });
  return listenHttp2(server);
});
