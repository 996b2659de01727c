import { create, createFileRegistry, fromBinary, toJson, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport } from "@skillenv/client/node";
import { http } from "../../gen/google/api/annotations_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection, ServerReflectionRequestSchema, type ServerReflectionResponse } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { SkillService } from "../../gen/skillenv/skills/v1/skills_pb.js";
import { API_SERVICES } from "../src/app.ts";
import { reflectionServices } from "../src/reflection/index.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";

const BUF = path.resolve(import.meta.dirname, "../../node_modules/.bin/buf");
const SHA256 = "ab".repeat(32);

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

/** Runs `buf curl` over gRPC with prior-knowledge HTTP/2; it learns the schema from reflection only. */
async function bufCurl(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args]);
  return stdout;
}

/** Sends the requests on one reflection stream, without an API key, and returns the responses in order. */
async function reflect(requests: ReadonlyArray<MessageInitShape<typeof ServerReflectionRequestSchema>["messageRequest"]>): Promise<ServerReflectionResponse[]> {
  const client = createClient(ServerReflection, createGrpcTransport({ baseUrl: service.url }));
  const responses: ServerReflectionResponse[] = [];
  const stream = (async function* () {
    for (const messageRequest of requests) yield create(ServerReflectionRequestSchema, { host: "here", messageRequest });
  })();
  for await (const response of client.serverReflectionInfo(stream)) responses.push(response);
  return responses;
}

function fileNames(response: ServerReflectionResponse | undefined): string[] {
  if (response?.messageResponse.case !== "fileDescriptorResponse") throw new Error(`no files: ${response?.messageResponse.case}`);
  return response.messageResponse.value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name);
}

function methodsOf(services: readonly DescService[]): string[] {
  return services.flatMap((s) => s.methods.map((method) => `${s.typeName}/${method.name}`));
}

describe("gRPC server reflection with buf curl (no --schema)", () => {
  it("--list-methods lists every method of every served service, without an API key", async () => {
    const listed = (await bufCurl("--list-methods", service.url)).trim().split("\n");
    expect(listed.sort()).toEqual(methodsOf([...API_SERVICES, Health, ...reflectionServices]).sort());
  });

  it("calls a method with the API key, its messages encoded from reflected descriptors", async () => {
    const key = ["-H", `authorization: Bearer ${KEY_A}`];
    expect(JSON.parse(await bufCurl(...key, "-d", "{}", `${service.url}/skillenv.skills.v1.SkillService/ListSkills`))).toEqual({});
    const presign = `${service.url}/skillenv.assets.v1.AssetService/Presign`;
    const presigned = JSON.parse(await bufCurl(...key, "-d", JSON.stringify({ sha256: SHA256, sizeBytes: 3 }), presign));
    expect(presigned).toMatchObject({ exists: false, uploadUrl: expect.stringContaining(`/objects/sha256/${SHA256}`) });
  });

  it("still refuses the API call itself without a key", async () => {
    const failed = bufCurl("-d", "{}", `${service.url}/skillenv.skills.v1.SkillService/ListSkills`);
    await expect(failed).rejects.toMatchObject({ stderr: expect.stringContaining('"code": "unauthenticated"') });
  });

  it("serves the deprecated v1alpha protocol for older clients", async () => {
    const args = ["--reflect-protocol", "grpc-v1alpha", "-H", `authorization: Bearer ${KEY_A}`, "-d", "{}"];
    expect(JSON.parse(await bufCurl(...args, `${service.url}/skillenv.skills.v1.SkillService/ListSkills`))).toEqual({});
  });
});

describe("gRPC server reflection, request by request", () => {
  it("answers a file with its imports, and leaves imports already sent on the stream out", async () => {
    const [first, again] = await reflect([
      { case: "fileByFilename", value: "skillenv/skills/v1/skills.proto" },
      { case: "fileByFilename", value: "skillenv/skills/v1/skills.proto" },
    ]);
    expect(first).toMatchObject({ validHost: "here", originalRequest: { messageRequest: { case: "fileByFilename" } } });
    expect(fileNames(first)).toEqual([
      "skillenv/skills/v1/skills.proto",
      "google/api/annotations.proto",
      "google/api/http.proto",
      "google/protobuf/descriptor.proto",
      "google/protobuf/timestamp.proto",
    ]);
    expect(fileNames(again)).toEqual(["skillenv/skills/v1/skills.proto"]);
  });

  it("finds the file declaring a service, a method, a message, a field and an extension", async () => {
    const symbols = [
      "skillenv.skills.v1.SkillService",
      "skillenv.skills.v1.SkillService.GetSkill",
      "skillenv.skills.v1.Skill",
      "skillenv.skills.v1.Skill.content_hash",
    ];
    const responses = await reflect([
      ...symbols.map((value) => ({ case: "fileContainingSymbol" as const, value })),
      { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: http.number } },
    ]);
    expect(responses.map((response) => fileNames(response)[0])).toEqual([
      ...symbols.map(() => "skillenv/skills/v1/skills.proto"),
      "google/api/annotations.proto",
    ]);
  });

  it("finds the files of a failed call's status and its details: google.rpc.Status, google.rpc.ErrorInfo", async () => {
    const responses = await reflect([
      { case: "fileContainingSymbol", value: "google.rpc.ErrorInfo" },
      { case: "fileContainingSymbol", value: "google.rpc.Status" },
    ]);
    expect(responses.map((response) => fileNames(response)[0])).toEqual(["google/rpc/error_details.proto", "google/rpc/status.proto"]);
  });

  it("lets a client decode an error's details as grpcurl does: the stable code, not bytes", async () => {
    const skills = createClient(SkillService, createNodeTransport({ baseUrl: service.url, apiKey: KEY_A, protocol: "grpc" }));
    const failure = await skills.getSkill({ name: "no-such-skill" }).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    const details = (failure?.details ?? []) as Array<{ type: string; value: Uint8Array }>;
    expect(details.map((detail) => detail.type)).toEqual(["google.rpc.ErrorInfo"]);
    // Each detail's type by reflection: the file declaring it and its imports, then the message.
    const [answer] = await reflect([{ case: "fileContainingSymbol", value: details[0]!.type }]);
    if (answer?.messageResponse.case !== "fileDescriptorResponse") throw new Error(`no files: ${answer?.messageResponse.case}`);
    const files = answer.messageResponse.value.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes));
    const byName = new Map(files.map((file) => [file.name, file]));
    const registry = createFileRegistry(files[0]!, (name) => byName.get(name));
    const info = registry.getMessage(details[0]!.type);
    expect(info && toJson(info, fromBinary(info, details[0]!.value))).toEqual({ reason: "skill_not_found", domain: "skillenv" });
  });

  it("lists the extension numbers of a type: google.api.http on MethodOptions, none on a message without extensions", async () => {
    const [options, plain] = await reflect([
      { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" },
      { case: "allExtensionNumbersOfType", value: "skillenv.skills.v1.Skill" },
    ]);
    expect(options?.messageResponse).toMatchObject({
      case: "allExtensionNumbersResponse",
      value: { baseTypeName: "google.protobuf.MethodOptions", extensionNumber: [http.number] },
    });
    expect(plain?.messageResponse).toMatchObject({ case: "allExtensionNumbersResponse", value: { extensionNumber: [] } });
  });

  it("answers NOT_FOUND for unknown names on a stream that stays open", async () => {
    const responses = await reflect([
      { case: "fileByFilename", value: "nope.proto" },
      { case: "fileContainingSymbol", value: "skillenv.Nope" },
      { case: "fileContainingExtension", value: { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 } },
      { case: "allExtensionNumbersOfType", value: "skillenv.Nope" },
      { case: "listServices", value: "" },
    ]);
    const errors = responses.slice(0, 4).map((response) => response.messageResponse);
    for (const error of errors) expect(error).toMatchObject({ case: "errorResponse", value: { errorCode: Code.NotFound } });
    expect(responses[4]?.messageResponse.case).toBe("listServicesResponse");
  });

  it("refuses a request that asks for nothing with INVALID_ARGUMENT", async () => {
    const [response] = await reflect([{ case: undefined }]);
    expect(response?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: Code.InvalidArgument } });
  });
});
