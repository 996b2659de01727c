// The floor for a bulk upload: a plaintext node:http (HTTP/1.1) server that reads and discards a
// PUT body and answers a small fixed JSON body. No hashing, no disk, no signature check. Same
// process model as the service, so the bytes cross the same loopback socket between two processes.
import * as http from "node:http";
import { listenHttp1, serveOverIpc } from "../lib/serve.ts";

// About the size of the object store's answer to a signed PUT ({sha256, sizeBytes}).
const BODY = Buffer.from(JSON.stringify({ sha256: "0".repeat(64), sizeBytes: "20971520" }));

await serveOverIpc(async () => {
  const server = http.createServer((req, res) => {
    req.once("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": BODY.byteLength });
      res.end(BODY);
    });
    req.once("error", () => res.destroy());
    // Discard: flowing mode with no 'data' listener drops every chunk as it arrives.
    req.resume();
  });
  return listenHttp1(server);
});
