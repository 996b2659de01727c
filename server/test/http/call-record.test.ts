import { Code, ConnectError, createClient, createConnectRouter } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { loadSettings } from "../../src/config/index.ts";
import { createRequestListener, listen, logWriter, recordingGate, type Listener } from "../../src/http/index.ts";
import { createTranscoder } from "../../src/transcoder/index.ts";

/**
 * The request log's record of a call that failed inside its handler: Connect answers any error
 * that is not a ConnectError `internal`, and the log says so too. The listener, the router and
 * the recording gate are the service's own; the handler is this test's, failing as a bug would.
 */
describe("the request log", () => {
  const lines: string[] = [];
  let listener: Listener;

  beforeAll(async () => {
    const router = createConnectRouter({ requestGate: recordingGate(async () => undefined) });
    router.service(Health, {
      check() {
        throw new TypeError("cannot read properties of undefined");
      },
      async *watch() {
        yield { status: 1 };
        throw new RangeError("maximum call stack size exceeded");
      },
    });
    const { http } = loadSettings({});
    const onRequest = createRequestListener({
      handlers: router.handlers,
      transcoder: createTranscoder({ services: [], handlers: router.handlers, maxBodyBytes: 1024 }),
      rawEndpoints: [],
      publicJson: new Map(),
      staticSites: [],
      corsOrigins: [],
      corsHeaders: [],
      limits: http,
      log: logWriter((line) => lines.push(line), 4096),
      readiness: () => "ready",
    });
    listener = await listen({ host: "127.0.0.1", port: 0, tls: undefined, limits: http }, onRequest);
  });
  afterAll(() => listener?.close(1000));

  const logged = async (procedure: string, protocol: string) => {
    // Written once the response is over, which may be after the client has it; the test's timeout bounds the wait.
    await expect.poll(() => lines.some((line) => line.includes(procedure) && line.includes(`"${protocol}"`)), { timeout: 25_000 }).toBe(true);
    return JSON.parse(lines.find((line) => line.includes(procedure) && line.includes(`"${protocol}"`))!) as Record<string, unknown>;
  };

  it("records a handler's unexpected error as internal, whatever the protocol", async () => {
    const connect = createClient(Health, createConnectTransport({ baseUrl: listener.url, httpVersion: "1.1" }));
    await expect(connect.check({})).rejects.toMatchObject({ code: Code.Internal });
    expect(await logged("grpc.health.v1.Health/Check", "connect")).toMatchObject({ code: "internal", httpStatus: 500 });

    const grpc = createClient(Health, createGrpcTransport({ baseUrl: listener.url }));
    const stream = async () => {
      for await (const _ of grpc.watch({})) void _;
    };
    await expect(stream()).rejects.toSatisfy((error) => ConnectError.from(error).code === Code.Internal);
    expect(await logged("grpc.health.v1.Health/Watch", "grpc")).toMatchObject({ code: "internal", httpStatus: 200 });
  });
});
