// Child of the sessions and runs suites: the real service (as bench/servers/service.ts runs it,
// settings from the environment the bench passes) on a data directory the bench owns and keeps
// (BENCH_DATA_DIR), so that the bench can look into its LevelDB after a clean stop. Beside it, in
// the same process, a bare Connect server (connect-node's adapter on node:http2: no auth gate, no
// request log, no body budget, no sessions, no journal) whose one RPC, SessionService.CallTool,
// hands the input straight to the service's own worker pool: the baseline that shares the
// service's pool, prepared components, process and event loop, without the session and journal.
//
// The child reports both base URLs as its URL, space-separated: "<service> <bare>" (see services.ts).
import * as http2 from "node:http2";
import { toJsonString } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import { startService, type RunningService } from "../../server/src/app.ts";
import { loadSettings } from "../../server/src/config/index.ts";
import { failure, returned, unknown, type TerminalReceipt } from "../../server/src/environments/index.ts";
import { receiptMessage } from "../../server/src/sessions/messages.ts";
import { listenHttp2, serveOverIpc, type Served } from "./serve.ts";

type Pool = NonNullable<RunningService["serviceEnv"]["pool"]>;
type Receipt = Awaited<ReturnType<Pool["invoke"]>>;

const NO_GRANTS = { filesystem: {}, network: [], secrets: [] };

await serveOverIpc(async () => {
  const dataDir = process.env.BENCH_DATA_DIR;
  if (!dataDir) throw new Error("BENCH_DATA_DIR: the data directory the bench owns");
  const settings = loadSettings({ ...process.env, SERVICE_LISTEN: "127.0.0.1:0", SERVICE_DATA_DIR: dataDir, SERVICE_LOG_REQUESTS: "false" });
  const service = await startService(settings);
  const bare = await serveBarePool(service.serviceEnv.pool!, settings.env.maxTurnSecs);
  return {
    url: `${service.url} ${bare.url}`,
    async close() {
      await bare.close();
      await service.close();
    },
  };
});

/**
 * CallTool as the bare minimum: `tool` is the admitted tool's id (= the pool's component id, so
 * the component the service prepared is the one invoked), no grants, the service's default
 * deadline and configuration, input and receipt converted exactly as the service converts them.
 */
async function serveBarePool(pool: Pool, maxTurnSecs: number): Promise<Served> {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(SessionService, {
        async callTool(request) {
          const input = request.input ? toJsonString(ValueSchema, request.input) : "{}";
          const receipt = await pool.invoke({
            component: {
              id: request.tool,
              load: () => Promise.reject(new Error(`bare pool RPC: ${request.tool} is not prepared; call it through the service first`)),
            },
            entrypoint: "run",
            input,
            configuration: "{}",
            deadlineMs: Date.now() + maxTurnSecs * 1000,
            grants: NO_GRANTS,
          });
          return { operationId: "", receipt: receiptMessage(terminal(receipt)) };
        },
      });
    },
  });
  const server = http2.createServer(handler);
  return listenHttp2(server);
}

function terminal(receipt: Receipt): TerminalReceipt {
  switch (receipt.outcome) {
    case "returned":
      return returned(receipt.output);
    case "failure":
      return failure(receipt.code, receipt.message);
    case "unknown":
      return unknown(receipt.message);
  }
}
