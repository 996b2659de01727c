// The framework's floor: connect-node's stock adapter serving AssetService.Presign with a constant
// dedup-hit answer ({exists: true}) and Health.Check with SERVING, and nothing else: no auth gate,
// no request log, no body budget, no storage, no interceptor. It speaks every protocol the adapter speaks (gRPC, gRPC-Web,
// Connect), so each protocol of the service is measured beside the same protocol here. The
// difference between the two is the service's own cost per call; what this costs over a bare
// node:http2 round trip is connect-node's.
//
// Node's http2 server does not fall back to HTTP/1.1 on plaintext, so it listens twice: h2c and
// HTTP/1.1. The child reports both base URLs as its URL, space-separated: "<h2c> <http/1.1>".
import * as http from "node:http";
import * as http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { listenHttp1, listenHttp2, serveOverIpc } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(AssetService, {
        presign: () => ({ exists: true }),
      });
      router.service(Health, {
        check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }),
      });
    },
  });
  const [h2, h1] = await Promise.all([listenHttp2(http2.createServer(handler)), listenHttp1(http.createServer(handler))]);
  return {
    url: `${h2.url} ${h1.url}`,
    async close() {
      await Promise.all([h2.close(), h1.close()]);
    },
  };
});
