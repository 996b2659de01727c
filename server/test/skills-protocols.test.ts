import { crc32 } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport, createServiceClient } from "@skillenv/client/node";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { SkillService } from "../../gen/skillenv/skills/v1/skills_pb.js";
import { KEY_A, requestLogSince, startTestService, type TestService } from "./helpers/service.ts";
import {
  bundleOf,
  deleteSkill,
  expectedMetadata,
  getSkill,
  listSkills,
  putObject,
  putSkill,
  refusal,
  skillMd,
  uploadAsset,
  type Bundle,
} from "./helpers/skills.ts";

/** The same registry flow over every protocol the port speaks: REST, gRPC (grpc-js, from the .proto files), Connect, gRPC-Web. */

const root = path.resolve(import.meta.dirname, "../..");
let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

function versions(tag: string): { v1: Bundle; v2: Bundle; d1: string; d2: string } {
  const d1 = `${tag}: first version.`;
  const d2 = `${tag}: second version.`;
  return {
    d1,
    d2,
    v1: bundleOf({ "SKILL.md": skillMd({ description: d1 }) }),
    v2: bundleOf({ "SKILL.md": skillMd({ description: d2 }), "scripts/tool.sh": "#!/bin/sh\necho ok\n" }),
  };
}

describe("REST (fetch)", () => {
  it("presign -> PUT -> finalize -> PUT /skills/{name}, then get, list, replace, delete", async () => {
    const { v1, v2, d1, d2 } = versions("rest");
    await uploadAsset(service, v1.zip);
    const created = await putSkill(service, "rest-skill", v1.hash);
    expect(created).toMatchObject({ status: 200, body: { changed: true, skill: { name: "rest-skill", ...expectedMetadata(v1, d1) } } });
    expect((await getSkill(service, "rest-skill")).body.skill).toEqual(created.body.skill);
    expect((await listSkills(service)).body.skills).toContainEqual(created.body.skill);

    await uploadAsset(service, v2.zip);
    const replaced = await putSkill(service, "rest-skill", v2.hash);
    expect(replaced.body).toMatchObject({ changed: true, skill: expectedMetadata(v2, d2) });
    expect((await putSkill(service, "rest-skill", v2.hash)).body.changed).toBe(false);

    expect((await deleteSkill(service, "rest-skill")).status).toBe(200);
    expect(await getSkill(service, "rest-skill")).toMatchObject(refusal(404, "skill_not_found"));
  });
});

describe("gRPC with @grpc/grpc-js from the protos", () => {
  function load(file: string): any {
    const definition = protoLoader.loadSync(path.join(root, file), {
      includeDirs: [path.join(root, "proto"), path.join(root, "third_party")],
      longs: String,
    });
    return grpc.loadPackageDefinition(definition);
  }

  let assets: any;
  let skills: any;
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${KEY_A}`);
  beforeAll(() => {
    const host = new URL(service.url).host;
    const credentials = grpc.credentials.createInsecure();
    assets = new (load("proto/skillenv/assets/v1/assets.proto").skillenv.assets.v1.AssetService)(host, credentials);
    skills = new (load("proto/skillenv/skills/v1/skills.proto").skillenv.skills.v1.SkillService)(host, credentials);
  });
  afterAll(() => {
    assets.close();
    skills.close();
  });

  function call(client: any, method: string, request: object): Promise<any> {
    return new Promise((resolve, reject) =>
      client[method](request, metadata, (error: grpc.ServiceError | null, response: any) => (error ? reject(error) : resolve(response))),
    );
  }

  async function refusalOf(client: any, method: string, request: object): Promise<{ code: grpc.status; reason: string }> {
    const error: grpc.ServiceError = await call(client, method, request).then(
      () => expect.unreachable(`${method} succeeded`),
      (e: grpc.ServiceError) => e,
    );
    const status = fromBinary(StatusSchema, error.metadata.get("grpc-status-details-bin")[0] as Buffer);
    return { code: error.code, reason: fromBinary(ErrorInfoSchema, status.details[0]!.value).reason };
  }

  async function upload(bundle: Bundle): Promise<void> {
    const presigned = await call(assets, "presign", { sha256: bundle.hash, sizeBytes: String(bundle.zip.byteLength) });
    if (presigned.exists) return;
    await putObject(presigned.uploadUrl, presigned.uploadHeaders, bundle.zip);
    await call(assets, "finalize", { sha256: bundle.hash });
  }

  it("the whole flow: upload, PutSkill, GetSkill, ListSkills, replace, no-op, DeleteSkill", async () => {
    const { v1, v2, d1, d2 } = versions("grpc");
    const mark = service.logs.length;
    await upload(v1);
    const created = await call(skills, "putSkill", { name: "grpc-skill", contentHash: v1.hash });
    expect(created.changed).toBe(true);
    expect(created.skill).toMatchObject({
      name: "grpc-skill",
      description: d1,
      contentHash: v1.hash,
      bundleBytes: String(v1.zip.byteLength),
      fileCount: v1.fileCount,
      totalFileBytes: String(v1.totalFileBytes),
    });
    expect(Number(created.skill.createdAt.seconds)).toBeGreaterThan(0);

    expect((await call(skills, "getSkill", { name: "grpc-skill" })).skill).toEqual(created.skill);
    const page = await call(skills, "listSkills", { pageSize: 10 });
    expect(page.skills.map((skill: any) => skill.name)).toContain("grpc-skill");

    await upload(v2);
    const replaced = await call(skills, "putSkill", { name: "grpc-skill", contentHash: v2.hash });
    expect(replaced).toMatchObject({ changed: true, skill: { description: d2, contentHash: v2.hash, fileCount: 2 } });
    const same = await call(skills, "putSkill", { name: "grpc-skill", contentHash: v2.hash });
    expect(same.changed).toBe(false);
    expect(same.skill).toEqual(replaced.skill);

    await call(skills, "deleteSkill", { name: "grpc-skill" });
    expect(await refusalOf(skills, "getSkill", { name: "grpc-skill" })).toEqual({ code: grpc.status.NOT_FOUND, reason: "skill_not_found" });

    const lines = await requestLogSince(service, mark);
    const skillCalls = lines.filter((line) => line.procedure?.startsWith("skillenv.skills.v1.SkillService/"));
    expect(skillCalls.map((line) => line.procedure.split("/")[1])).toEqual([
      "PutSkill",
      "GetSkill",
      "ListSkills",
      "PutSkill",
      "PutSkill",
      "DeleteSkill",
      "GetSkill",
    ]);
    for (const line of skillCalls) expect(line).toMatchObject({ protocol: "grpc", workspace: "a" });
  });

  it.each([
    ["an invalid name", "putSkill", () => ({ name: "Bad__Name", contentHash: "0".repeat(64) }), grpc.status.INVALID_ARGUMENT, "invalid_skill_name"],
    ["a reserved name on get", "getSkill", () => ({ name: "skills" }), grpc.status.INVALID_ARGUMENT, "invalid_skill_name"],
    ["an unknown hash", "putSkill", () => ({ name: "grpc-missing", contentHash: "0".repeat(64) }), grpc.status.NOT_FOUND, "asset_not_found"],
    ["an unknown skill on delete", "deleteSkill", () => ({ name: "grpc-missing" }), grpc.status.NOT_FOUND, "skill_not_found"],
  ] as const)("refuses %s with ErrorInfo reason", async (_label, method, request, code, reason) => {
    expect(await refusalOf(skills, method, request())).toEqual({ code, reason });
  });

  it("refuses a hostile bundle with its bundle_* reason", async () => {
    const noSkillMd = bundleOf({ "README.md": "no skill here" });
    await upload(noSkillMd);
    expect(await refusalOf(skills, "putSkill", { name: "grpc-hostile", contentHash: noSkillMd.hash })).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      reason: "bundle_missing_skill_md",
    });
  });
});

describe.each([
  ["connect", "1.1", true],
  ["connect", "2", false],
  ["grpc", "2", true],
  ["grpc-web", "1.1", true],
] as const)("generated client over %s (HTTP/%s, binary %s)", (protocol, httpVersion, useBinaryFormat) => {
  const name = `client-${protocol}-${httpVersion}-${useBinaryFormat ? "bin" : "json"}`.replace(".", "");
  const transport = () => createNodeTransport({ baseUrl: service.url, apiKey: KEY_A, protocol, httpVersion, useBinaryFormat });

  it("binds, reads, lists, replaces and deletes a skill", async () => {
    const { v1, v2, d1, d2 } = versions(name);
    const client = createServiceClient(transport());
    const rpc = createClient(SkillService, transport());
    await client.uploadAsset(v1.zip);
    await client.uploadAsset(v2.zip);

    const mark = service.logs.length;
    const created = await rpc.putSkill({ name, contentHash: v1.hash });
    expect(created).toMatchObject({ changed: true, skill: { name, description: d1, contentHash: v1.hash, fileCount: 1 } });
    expect(created.skill!.bundleBytes).toBe(BigInt(v1.zip.byteLength));
    expect(created.skill!.totalFileBytes).toBe(BigInt(v1.totalFileBytes));
    expect(timestampDate(created.skill!.createdAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);

    expect(await client.skills.get(name)).toEqual({
      ...created.skill,
      files: [{ path: "SKILL.md", sizeBytes: v1.totalFileBytes, crc32: crc32(skillMd({ description: d1 })) }],
    });
    expect((await client.skills.list({ pageSize: 1000 })).skills.map((skill) => skill.name)).toContain(name);

    const replaced = await rpc.putSkill({ name, contentHash: v2.hash });
    expect(replaced).toMatchObject({ changed: true, skill: { description: d2, contentHash: v2.hash, fileCount: 2 } });
    expect((await rpc.putSkill({ name, contentHash: v2.hash })).changed).toBe(false);

    await client.skills.delete(name);
    const error = await client.skills.delete(name).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("skill_not_found");

    const lines = await requestLogSince(service, mark);
    expect(lines.map((line) => line.procedure?.replace("skillenv.skills.v1.SkillService/", ""))).toEqual([
      "PutSkill",
      "GetSkill",
      "ListSkills",
      "PutSkill",
      "PutSkill",
      "DeleteSkill",
      "DeleteSkill",
    ]);
    for (const line of lines) expect(line).toMatchObject({ protocol, workspace: "a" });
  });

  it("refuses an invalid name with ErrorInfo reason invalid_skill_name", async () => {
    const error = await createServiceClient(transport())
      .skills.get("Invalid")
      .catch((e: unknown) => e);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("invalid_skill_name");
  });

  it("refuses a hash of another bundle's bytes that were never uploaded with asset_not_found", async () => {
    const error = await createClient(SkillService, transport())
      .putSkill({ name, contentHash: bundleOf({ "SKILL.md": skillMd({ description: `${name} never` }) }).hash })
      .catch((e: unknown) => e);
    expect((error as ConnectError).code).toBe(Code.NotFound);
    expect((error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("asset_not_found");
  });
});
