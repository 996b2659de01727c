// Child of the hosts suite: the real service (as bench/servers/service.ts runs it: settings from
// the environment the bench passes, a throwaway data directory) and, beside it in the same
// process, a bare Connect server (connect-node's adapter on node:http2: no auth gate, no request
// log, no body budget, no sessions, no journal, no host hub) whose one RPC, HostService.Connect,
// answers each message of the stream at once with one message carrying the same payload back:
// the host command stream's transport on its own, in the service's process and event loop.
//
// The child reports both base URLs as its URL, space-separated: "<service> <bare>".
import * as fs from "node:fs/promises";
import * as http2 from "node:http2";
import * as os from "node:os";
import * as path from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { HostService } from "../../gen/skillenv/env/v1/host_pb.js";
import { startService } from "../../server/src/app.ts";
import { loadSettings } from "../../server/src/config/index.ts";
import { listenHttp2, serveOverIpc, type Served } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-hosts-"));
  const settings = loadSettings({ ...process.env, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_DATA_DIR: dataDir, SERVICE_LOG_REQUESTS: "false" });
  const service = await startService(settings);
  const bare = await serveEchoStream();
  return {
    url: `${service.url} ${bare.url}`,
    async close() {
      await bare.close();
      await service.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
});

/**
 * HostService.Connect as a ping-pong: every `receipt {operationId, returned {output}}` the client
 * sends is answered with `command {operationId, input: output}`, the two messages a host tool
 * call puts on the real stream, in the other order.
 */
async function serveEchoStream(): Promise<Served> {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(HostService, {
        async *connect(requests) {
          for await (const { message } of requests) {
            const receipt = message.case === "receipt" ? message.value : undefined;
            const returned = receipt?.receipt.case === "returned" ? receipt.receipt.value : undefined;
            if (!receipt || !returned) throw new ConnectError("the echo stream takes receipts with a returned output only", Code.InvalidArgument);
            yield { message: { message: { case: "command", value: { operationId: receipt.operationId, input: returned.output } } } };
          }
        },
      });
    },
  });
  const server = http2.createServer(handler);
  return listenHttp2(server);
}
