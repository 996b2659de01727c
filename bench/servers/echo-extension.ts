// Child of the hosts suite: the smallest extension environment (skillenv.extension.v1), in its own
// process so that its CPU is its own. connect-node's adapter on node:http (HTTP/1.1, as the
// service calls extensions); every RPC but Execute answers empty, and Execute answers at once
// with one `returned` receipt carrying the input back: no accepted, no progress, no auth, no
// state, nothing recorded (the test extension of server/test records every call it gets).
import * as http from "node:http";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ExtensionEnvironmentService } from "../../gen/skillenv/extension/v1/extension_pb.js";
import { listenHttp1, serveOverIpc } from "../lib/serve.ts";

await serveOverIpc(async () => {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(ExtensionEnvironmentService, {
        setup: () => ({}),
        stage: () => ({}),
        cancel: () => ({}),
        detach: () => ({}),
        teardown: () => ({}),
        async *execute(request) {
          yield { receipt: { case: "returned", value: { output: request.input } } };
        },
      });
    },
  });
  const server = http.createServer(handler);
  return listenHttp1(server);
});
