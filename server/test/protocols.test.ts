import { fromBinary } from "@bufbuild/protobuf";
import { ConnectError, Code, createClient } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createHash, randomBytes } from "node:crypto";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport, createServiceClient } from "@skillenv/client/node";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { KEY_A, postJson, startTestService, type TestService } from "./helpers/service.ts";

const root = path.resolve(import.meta.dirname, "../..");
let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

/** A gRPC client built by @grpc/grpc-js straight from the .proto files, as a non-Connect user would. */
function grpcJsClient(): { client: grpc.Client; metadata: grpc.Metadata } {
  const definition = protoLoader.loadSync(path.join(root, "proto/skillenv/assets/v1/assets.proto"), {
    includeDirs: [path.join(root, "proto"), path.join(root, "third_party")],
    longs: String,
  });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  const Service = loaded.skillenv.assets.v1.AssetService as typeof grpc.Client;
  const client = new Service(new URL(service.url).host, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${KEY_A}`);
  return { client, metadata };
}

function grpcCall(client: any, method: string, request: object, metadata: grpc.Metadata): Promise<any> {
  return new Promise((resolve, reject) =>
    client[method](request, metadata, (error: grpc.ServiceError | null, response: any) => (error ? reject(error) : resolve(response))),
  );
}

describe("one port, four protocols", () => {
  it("gRPC (@grpc/grpc-js from the protos): presign and a refusal carrying ErrorInfo", async () => {
    const { client, metadata } = grpcJsClient();
    try {
      const bytes = randomBytes(100);
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      const presigned = await grpcCall(client, "presign", { sha256, sizeBytes: "100" }, metadata);
      expect(presigned.exists).toBe(false);
      expect(presigned.uploadUrl).toContain(`/objects/sha256/${sha256}`);

      const error: grpc.ServiceError = await grpcCall(client, "finalize", { sha256 }, metadata).catch((e) => e);
      expect(error.code).toBe(grpc.status.NOT_FOUND);
      const details = error.metadata.get("grpc-status-details-bin")[0] as Buffer;
      const status = fromBinary(StatusSchema, details);
      const info = fromBinary(ErrorInfoSchema, status.details[0]!.value);
      expect(info).toMatchObject({ reason: "asset_not_found", domain: "skillenv" });
    } finally {
      client.close();
    }
  });

  it("gRPC refuses a missing key with UNAUTHENTICATED", async () => {
    const { client } = grpcJsClient();
    try {
      const error: grpc.ServiceError = await grpcCall(client, "presign", { sha256: "0".repeat(64) }, new grpc.Metadata()).catch((e) => e);
      expect(error.code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });

  it.each([
    ["connect", "1.1", true],
    ["connect", "1.1", false],
    ["connect", "2", true],
    ["grpc", "2", true],
    ["grpc-web", "1.1", true],
    ["grpc-web", "2", false],
  ] as const)("%s over HTTP/%s (binary %s): the full upload flow and ErrorInfo on refusal", async (protocol, httpVersion, useBinaryFormat) => {
    const transport = createNodeTransport({ baseUrl: service.url, apiKey: KEY_A, protocol, httpVersion, useBinaryFormat });
    const client = createServiceClient(transport);
    const bytes = randomBytes(2048);
    const first = await client.uploadAsset(bytes);
    expect(first).toMatchObject({ sizeBytes: 2048, uploaded: true });
    expect(await client.uploadAsset(bytes)).toMatchObject({ sha256: first.sha256, uploaded: false });

    const error = await client.assets.finalize({ sha256: "e".repeat(64) }).catch((e) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("asset_not_found");
  });

  it("REST (fetch) reaches the same handler", async () => {
    const bytes = randomBytes(10);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const response = await postJson(service.url, "/assets/presign", { sha256, sizeBytes: 10 }, KEY_A);
    expect(response.body.uploadUrl).toContain(`${service.url}/objects/sha256/${sha256}`);
  });

  it("serves the standard gRPC health service without a key", async () => {
    const transport = createNodeTransport({ baseUrl: service.url, apiKey: "unused-key-0000000", protocol: "grpc" });
    const health = createClient(Health, transport);
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect((await health.check({ service: "skillenv.assets.v1.AssetService" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    await expect(health.check({ service: "no.such.Service" })).rejects.toMatchObject({ code: Code.NotFound });
  });

  it("logs the protocol of each call", async () => {
    const protocols = new Set(service.logs.map((line) => JSON.parse(line).protocol));
    for (const protocol of ["grpc", "grpc-web", "connect", "rest", "object-store"]) expect(protocols).toContain(protocol);
  });
});
