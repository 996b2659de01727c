import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { create } from "@bufbuild/protobuf";
import { ConnectError, createClient, createContextValues, createHandlerContext, type Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeTransport } from "@skillenv/client/node";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { ArtifactService, PrepareRequestSchema } from "../../gen/skillenv/env/v1/artifacts_pb.js";
import { createArtifacts, type Artifacts, type Preparer } from "../src/artifacts/index.ts";
import { createAssets } from "../src/assets/index.ts";
import { workspaceContextKey } from "../src/auth/index.ts";
import { serviceError } from "../src/errors/index.ts";
import { dataDirSecrets, FileBlobStore, openStore, type Store } from "../src/storage/index.ts";
import { coreModule, testComponent, withCustomSection, type TestWorld } from "./helpers/components.ts";
import { bearer, KEY_A, KEY_B, postJson, startTestService, type TestService, onEmbeddedStorage } from "./helpers/service.ts";
import { sha256, uploadAsset } from "./helpers/skills.ts";

const INLINE_LIMIT = 8 * 1024;
const COMPONENT_LIMIT = 64 * 1024;
const SOURCE_LIMIT = 1024;
const TOOL_WORLD = "skillenv:env/tool@0.1.0";
const AGENT_LOOP_WORLD = "skillenv:env/agent-loop@0.1.0";

let service: TestService;
const components = new Map<TestWorld, Uint8Array>();

beforeAll(async () => {
  service = await startTestService({
    SERVICE_ENV_MAX_INLINE_BYTES: String(INLINE_LIMIT),
    SERVICE_ENV_MAX_COMPONENT_BYTES: String(COMPONENT_LIMIT),
    SERVICE_ENV_MAX_SOURCE_BYTES: String(SOURCE_LIMIT),
  });
  const worlds: TestWorld[] = [
    "tool",
    "agent-loop",
    "tool-wasi",
    "tool-sockets",
    "tool-wasi-unprovided",
    "tool-wasi-03",
    "tool-wasi-prototype",
    "tool-host",
    "tool-vendor",
    "tool-resource",
    "both",
    "neither",
    "bad-run",
    "tool-random-f",
  ];
  for (const world of worlds) components.set(world, await testComponent(world));
});
afterAll(() => service.close());

/** A component of `world` whose bytes (and id) are unique to `label`. */
function component(world: TestWorld, label: string, padding = 0): Uint8Array {
  return withCustomSection(components.get(world)!, label, padding);
}

interface Reply {
  status: number;
  body: any;
}

async function post(route: string, body: Uint8Array | string, contentType: string, key = KEY_A): Promise<Reply> {
  const response = await fetch(service.url + route, { method: "POST", headers: { "content-type": contentType, ...bearer(key) }, body: body as BodyInit });
  return { status: response.status, body: await response.json() };
}

async function get(route: string, key = KEY_A): Promise<Reply> {
  const response = await fetch(service.url + route, { headers: bearer(key) });
  return { status: response.status, body: await response.json() };
}

const admitRaw = (route: string, bytes: Uint8Array, key = KEY_A) => post(route, bytes, "application/wasm", key);

function refused(status: number, code: string): Reply {
  return expect.objectContaining({ status, body: expect.objectContaining({ code }) });
}

function blobPath(id: string): string {
  return path.join(service.dataDir, "blobs", "sha256", id.slice(0, 2), id);
}

function client(protocol: "connect" | "grpc", key = KEY_A): Client<typeof ArtifactService> {
  return createClient(ArtifactService, createNodeTransport({ baseUrl: service.url, apiKey: key, protocol }));
}

async function stableCode(call: Promise<unknown>): Promise<string | undefined> {
  const error = await call.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConnectError);
  return (error as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason;
}

describe("component admission over REST", () => {
  it("admits a raw application/wasm tool and reports its admission", async () => {
    const bytes = component("tool", "rest-tool");
    const admitted = await admitRaw("/v1/tools", bytes);
    expect(admitted).toEqual({ status: 200, body: { id: sha256(bytes) } });

    const reported = await get(`/v1/tools/${sha256(bytes)}`);
    expect(reported.status).toBe(200);
    expect(reported.body.artifact).toEqual({
      id: sha256(bytes),
      kind: "tool",
      sizeBytes: String(bytes.byteLength),
      admittedAt: expect.any(String),
      world: TOOL_WORLD,
      imports: ["skillenv:env/types@0.1.0"],
    });
    expect(Date.parse(reported.body.artifact.admittedAt)).toBeLessThanOrEqual(Date.now());
  });

  it("admits an agent loop, which may import the host interface", async () => {
    const bytes = component("agent-loop", "rest-agent-loop");
    expect(await admitRaw("/v1/agentloops", bytes)).toEqual({ status: 200, body: { id: sha256(bytes) } });
    const reported = await get(`/v1/agentloops/${sha256(bytes)}`);
    expect(reported.body.artifact).toMatchObject({ kind: "agentloop", world: AGENT_LOOP_WORLD });
    expect(reported.body.artifact.imports).toEqual(["skillenv:env/types@0.1.0", "skillenv:env/host@0.1.0"]);
  });

  it("admits the grantable WASI 0.2 interfaces, wasi:cli/exit included", async () => {
    const bytes = component("tool-wasi", "rest-wasi");
    expect((await admitRaw("/v1/tools", bytes)).status).toBe(200);
    expect((await get(`/v1/tools/${sha256(bytes)}`)).body.artifact.imports).toEqual([
      "wasi:io/streams@0.2.3",
      "wasi:cli/exit@0.2.3",
      "wasi:http/outgoing-handler@0.2.3",
      "skillenv:env/types@0.1.0",
    ]);
  });

  it.runIf(onEmbeddedStorage)("treats the same bytes twice as a no-op: same id, same record, no second blob write", async () => {
    const bytes = component("tool", "twice");
    const first = await admitRaw("/v1/tools", bytes);
    const record = (await get(`/v1/tools/${first.body.id}`)).body.artifact;
    const stored = await fs.stat(blobPath(first.body.id));

    const second = await admitRaw("/v1/tools", bytes);
    expect(second).toEqual(first);
    expect((await get(`/v1/tools/${first.body.id}`)).body.artifact).toEqual(record);
    const after = await fs.stat(blobPath(first.body.id));
    expect([after.ino, after.mtimeMs]).toEqual([stored.ino, stored.mtimeMs]);
  });

  it.runIf(onEmbeddedStorage)("shares the bytes but not the admission across workspaces, with no existence oracle", async () => {
    const bytes = component("tool", "oracle");
    const id = sha256(bytes);
    const before = await get(`/v1/tools/${id}`, KEY_B);
    expect(before).toEqual(refused(404, "not_found"));

    await admitRaw("/v1/tools", bytes, KEY_A);
    const stored = await fs.stat(blobPath(id));
    expect(await get(`/v1/tools/${id}`, KEY_B)).toEqual(before);
    const prepare = await postJson(service.url, "/v1/service-env/prepare", { tools: [id] }, KEY_B);
    expect(prepare).toEqual(refused(404, "not_found"));

    expect(await admitRaw("/v1/tools", bytes, KEY_B)).toEqual({ status: 200, body: { id } });
    expect((await get(`/v1/tools/${id}`, KEY_B)).status).toBe(200);
    expect((await fs.stat(blobPath(id))).mtimeMs).toBe(stored.mtimeMs);
  });

  it("keeps kinds apart: a tool id is no agent loop and no program", async () => {
    const bytes = component("tool", "kinds");
    await admitRaw("/v1/tools", bytes);
    expect(await get(`/v1/agentloops/${sha256(bytes)}`)).toEqual(refused(404, "not_found"));
    expect(await get(`/v1/programs/${sha256(bytes)}`)).toEqual(refused(404, "not_found"));
  });

  it.each<[string, "/v1/tools" | "/v1/agentloops", string, string, () => Promise<Uint8Array> | Uint8Array]>([
    ["a core module", "/v1/tools", "invalid_component", "core WebAssembly module", () => coreModule()],
    ["garbage bytes", "/v1/tools", "invalid_component", "preamble", () => new TextEncoder().encode("definitely not wasm")],
    ["a truncated component", "/v1/tools", "invalid_component", "truncated", () => component("tool", "truncated").subarray(0, 200)],
    ["a tool", "/v1/agentloops", "invalid_component", "POST /v1/tools", () => component("tool", "as-loop")],
    ["an agent loop", "/v1/tools", "invalid_component", "POST /v1/agentloops", () => component("agent-loop", "as-tool")],
    ["a component exporting run and turn", "/v1/tools", "invalid_component", "both run and turn", () => component("both", "both")],
    ["a component exporting neither world", "/v1/tools", "invalid_component", "neither run", () => component("neither", "neither")],
    [
      "a tool whose run has another signature",
      "/v1/tools",
      "invalid_component",
      "run is func() -> s32, but skillenv:env/tool@0.1.0 declares func(string, string, u64) -> result<string, record { code: string, message: string }>",
      () => component("bad-run", "bad-run"),
    ],
    ["a tool importing wasi:sockets", "/v1/tools", "import_not_grantable", "wasi:sockets/tcp@0.2.3", () => component("tool-sockets", "sockets")],
    ["a tool importing wasi:cli/run", "/v1/tools", "import_not_grantable", "wasi:cli/run@0.2.3", () => component("tool-wasi-unprovided", "cli-run")],
    ["a tool importing WASI 0.3", "/v1/tools", "import_not_grantable", "wasi:io/streams@0.3.0", () => component("tool-wasi-03", "wasi-03")],
    [
      "a tool importing an Object.prototype name",
      "/v1/tools",
      "import_not_grantable",
      "wasi:constructor/call@0.2.3",
      () => component("tool-wasi-prototype", "proto"),
    ],
    ["a tool importing the agent-loop host", "/v1/tools", "import_not_grantable", "skillenv:env/host@0.1.0", () => component("tool-host", "host")],
    ["a tool importing a vendor interface", "/v1/tools", "import_not_grantable", "acme:vault/secrets@1.0.0", () => component("tool-vendor", "vendor")],
    ["a tool importing a resource and a function", "/v1/tools", "import_not_grantable", "handle", () => component("tool-resource", "resource")],
  ])("refuses %s on POST %s with %s", async (_, route, code, mention, bytesOf) => {
    const bytes = await bytesOf();
    const reply = await admitRaw(route, bytes);
    expect(reply).toEqual(refused(400, code));
    expect(reply.body.message).toContain(mention);
    expect(await get(`${route}/${sha256(bytes)}`)).toEqual(refused(404, "not_found"));
    await expect(fs.stat(blobPath(sha256(bytes)))).rejects.toThrow();
  });

  it("refuses a raw body over the inline limit with component_too_large", async () => {
    const bytes = component("tool", "too-large-inline", INLINE_LIMIT);
    const reply = await admitRaw("/v1/tools", bytes);
    expect(reply).toEqual(refused(400, "component_too_large"));
    expect(reply.body.message).toContain("assetSha256");
  });

  it("refuses an empty body, a body with an asset reference too, and unknown JSON fields", async () => {
    expect(await admitRaw("/v1/tools", new Uint8Array(0))).toEqual(refused(400, "invalid_argument"));
    const both = await admitRaw(`/v1/tools?assetSha256=${"0".repeat(64)}`, component("tool", "both-sources"));
    expect(both).toEqual(refused(400, "invalid_argument"));
    expect(await post("/v1/tools", JSON.stringify({ asset: "x" }), "application/json")).toEqual(refused(400, "malformed_request"));
    expect(await post("/v1/tools", "{not json", "application/json")).toEqual(refused(400, "malformed_request"));
  });

  it.each(["/v1/tools", "/v1/agentloops"])("says that a JSON body on POST %s needs content-type: application/json", async (route) => {
    for (const contentType of ["application/x-www-form-urlencoded", "text/plain;charset=UTF-8", "application/wasm"]) {
      const reply = await post(route, ` ${JSON.stringify({ assetSha256: "0".repeat(64) })}`, contentType);
      expect(reply).toEqual(refused(400, "malformed_request"));
      expect(reply.body.message).toContain(`content type is ${contentType}: a JSON body needs content-type: application/json`);
    }
  });

  it("refuses malformed ids and missing keys", async () => {
    expect(await get("/v1/tools/ABC")).toEqual(refused(400, "invalid_sha256"));
    const anonymous = await fetch(`${service.url}/v1/tools`, {
      method: "POST",
      headers: { "content-type": "application/wasm" },
      body: component("tool", "anon") as BodyInit,
    });
    expect(anonymous.status).toBe(401);
  });
});

describe("component admission by asset reference", () => {
  it("admits a component uploaded through the assets upload, beyond the inline limit", async () => {
    const bytes = component("tool", "by-asset", INLINE_LIMIT * 2);
    const hash = await uploadAsset(service, bytes);
    const reply = await post("/v1/tools", JSON.stringify({ assetSha256: hash }), "application/json");
    expect(reply).toEqual({ status: 200, body: { id: hash } });
    expect((await get(`/v1/tools/${hash}`)).body.artifact).toMatchObject({ id: hash, sizeBytes: String(bytes.byteLength) });
    // The query form binds the same field.
    expect(await post(`/v1/tools?assetSha256=${hash}`, new Uint8Array(0), "application/wasm")).toEqual(reply);
  });

  it("validates asset components like inline ones", async () => {
    const hash = await uploadAsset(service, component("tool-sockets", "asset-sockets"));
    expect(await post("/v1/tools", JSON.stringify({ assetSha256: hash }), "application/json")).toEqual(refused(400, "import_not_grantable"));
  });

  it("refuses an asset over the component limit, another workspace's asset and a malformed hash", async () => {
    const huge = await uploadAsset(service, component("tool", "asset-huge", COMPONENT_LIMIT));
    expect(await post("/v1/tools", JSON.stringify({ assetSha256: huge }), "application/json")).toEqual(refused(400, "component_too_large"));

    const foreign = await uploadAsset(service, component("tool", "asset-foreign"), KEY_B);
    expect(await post("/v1/tools", JSON.stringify({ assetSha256: foreign }), "application/json")).toEqual(refused(404, "asset_not_found"));
    expect(await post("/v1/tools", JSON.stringify({ assetSha256: "xyz" }), "application/json")).toEqual(refused(400, "invalid_sha256"));
  });
});

describe.each(["connect", "grpc"] as const)("component admission over %s", (protocol) => {
  it("admits inline bytes and reports the admission", async () => {
    const bytes = component("tool", `inline-${protocol}`);
    const { id } = await client(protocol).admitTool({ component: { contentType: "application/wasm", data: bytes } });
    expect(id).toBe(sha256(bytes));
    const { artifact } = await client(protocol).getTool({ id });
    expect(artifact).toMatchObject({ id, kind: "tool", sizeBytes: BigInt(bytes.byteLength), world: TOOL_WORLD });
  });

  it("admits an agent loop by asset reference", async () => {
    const hash = await uploadAsset(service, component("agent-loop", `asset-${protocol}`, INLINE_LIMIT));
    expect(await client(protocol).admitAgentLoop({ assetSha256: hash })).toMatchObject({ id: hash });
    expect((await client(protocol).getAgentLoop({ id: hash })).artifact?.world).toBe(AGENT_LOOP_WORLD);
  });

  it("refuses inline bytes over the inline limit, and unknown ids", async () => {
    const bytes = component("tool", `too-large-${protocol}`, INLINE_LIMIT);
    expect(await stableCode(client(protocol).admitTool({ component: { data: bytes } }))).toBe("component_too_large");
    expect(await stableCode(client(protocol).getTool({ id: "f".repeat(64) }))).toBe("not_found");
  });
});

describe("program admission", () => {
  const source = "export default (input) => ({ echoed: input }); // ✓";

  it("admits {source} JSON and reports it; the raw text/plain form is the same program", async () => {
    const id = sha256(new TextEncoder().encode(source));
    expect(await post("/v1/programs", JSON.stringify({ source }), "application/json; charset=utf-8")).toEqual({ status: 200, body: { id } });
    const reported = await get(`/v1/programs/${id}`);
    expect(reported.body.artifact).toEqual({
      id,
      kind: "program",
      sizeBytes: String(new TextEncoder().encode(source).byteLength),
      admittedAt: expect.any(String),
      // Components' fields, present with their defaults (every field is written).
      world: "",
      imports: [],
    });
    expect(await post("/v1/programs", source, "text/plain; charset=utf-8")).toEqual({ status: 200, body: { id } });
    expect((await get(`/v1/programs/${id}`)).body).toEqual(reported.body);
  });

  it("admits raw text of another workspace separately, and over Connect", async () => {
    const text = "print('connect')";
    const { id } = await client("connect").admitProgram({ source: text });
    expect(id).toBe(sha256(new TextEncoder().encode(text)));
    expect(await get(`/v1/programs/${id}`, KEY_B)).toEqual(refused(404, "not_found"));
    expect((await client("connect", KEY_B).admitProgram({ body: { data: new TextEncoder().encode(text) } })).id).toBe(id);
  });

  it.each<[string, string, string, string | Uint8Array]>([
    ["invalid UTF-8", "source_not_utf8", "text/plain", new Uint8Array([0x70, 0xff, 0xfe, 0x71])],
    // Proto JSON decoding refuses a string that has no UTF-8 form before admission sees it.
    ["an unpaired surrogate in JSON", "malformed_request", "application/json", '{"source": "a\\ud800b"}'],
    ["a source over the limit", "source_too_large", "text/plain", "x".repeat(SOURCE_LIMIT + 1)],
    ["a JSON source over the limit in UTF-8 bytes", "source_too_large", "application/json", JSON.stringify({ source: "é".repeat(SOURCE_LIMIT / 2 + 1) })],
    ["an empty source", "invalid_argument", "text/plain", ""],
    ["an unknown JSON field", "malformed_request", "application/json", '{"source": "x", "language": "js"}'],
  ])("refuses %s with %s", async (_, code, contentType, body) => {
    expect(await post("/v1/programs", body, contentType)).toEqual(refused(400, code));
  });

  it("accepts a source of exactly the limit", async () => {
    expect((await post("/v1/programs", "y".repeat(SOURCE_LIMIT), "text/plain")).status).toBe(200);
  });
});

describe("POST /v1/service-env/prepare", () => {
  let tool: string;
  let loop: string;
  let program: string;
  beforeAll(async () => {
    tool = (await admitRaw("/v1/tools", component("tool", "prepare-tool"))).body.id;
    loop = (await admitRaw("/v1/agentloops", component("agent-loop", "prepare-loop"))).body.id;
    program = (await post("/v1/programs", "prepare me", "text/plain")).body.id;
  });

  it("prepares admitted artifacts: each once, agent loops, programs, then tools", async () => {
    const reply = await postJson(service.url, "/v1/service-env/prepare", { tools: [tool, tool], programs: [program], agentloops: [loop] }, KEY_A);
    expect(reply).toEqual({
      status: 200,
      body: {
        artifacts: [
          { id: loop, kind: "agentloop", ready: true },
          { id: program, kind: "program", ready: true },
          { id: tool, kind: "tool", ready: true },
        ],
      },
    });
    expect(await postJson(service.url, "/v1/service-env/prepare", {}, KEY_A)).toEqual({ status: 200, body: { artifacts: [] } });
  });

  it("prepares over Connect too", async () => {
    const { artifacts } = await client("connect").prepare({ tools: [tool] });
    expect(artifacts).toMatchObject([{ id: tool, kind: "tool", ready: true }]);
  });

  it("refuses ids the workspace did not admit, or under another kind, before preparing anything", async () => {
    const refusedPrepare = (body: unknown, key = KEY_A) => postJson(service.url, "/v1/service-env/prepare", body, key);
    expect(await refusedPrepare({ tools: [tool] }, KEY_B)).toEqual(refused(404, "not_found"));
    expect(await refusedPrepare({ tools: [tool, "e".repeat(64)] })).toEqual(refused(404, "not_found"));
    expect(await refusedPrepare({ agentloops: [tool] })).toEqual(refused(404, "not_found"));
    expect(await refusedPrepare({ programs: ["nope"] })).toEqual(refused(400, "invalid_sha256"));
    expect(await refusedPrepare({ tools: [tool], extra: 1 })).toEqual(refused(400, "malformed_request"));
  });

  it("fails with preparation_failed naming a function the environment does not provide", async () => {
    // wasi:random/random is provided, so admission (which reads interface names) accepts it; its
    // function f is not, which preparation finds by checking the workers' real imports.
    const { id } = (await admitRaw("/v1/tools", component("tool-random-f", "prepare-random-f"))).body;
    const reply = await postJson(service.url, "/v1/service-env/prepare", { tools: [id] }, KEY_A);
    expect(reply).toEqual(refused(422, "preparation_failed"));
    expect(reply.body.message).toContain(id);
    expect(reply.body.message).toContain("f of wasi:random/random@0.2.3");
  });

  it.runIf(onEmbeddedStorage)("fails with preparation_failed naming the artifact when its bytes are gone", async () => {
    const bytes = component("tool", "prepare-lost");
    const { id } = (await admitRaw("/v1/tools", bytes)).body;
    await fs.rm(blobPath(id));
    const reply = await postJson(service.url, "/v1/service-env/prepare", { tools: [id] }, KEY_A);
    expect(reply).toEqual(refused(422, "preparation_failed"));
    expect(reply.body.message).toContain(id);
  });
});

describe("the server-internal API", () => {
  let dataDir: string;
  let store: Store;
  let artifacts: Artifacts;
  beforeAll(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-artifacts-"));
    store = await openStore({ dataDir });
    const blobs = await FileBlobStore.open(dataDir);
    const assets = await createAssets({
      store,
      blobs,
      secrets: dataDirSecrets(dataDir),
      maxUploadBytes: COMPONENT_LIMIT,
      uploadUrlTtlSecs: 60,
      publicUrl: undefined,
    });
    artifacts = createArtifacts({
      store,
      blobs,
      assets,
      limits: { maxComponentBytes: COMPONENT_LIMIT, maxInlineComponentBytes: INLINE_LIMIT, maxSourceBytes: SOURCE_LIMIT },
    });
  });
  afterAll(async () => {
    await store.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  const context = (workspace: string) =>
    createHandlerContext({
      service: ArtifactService,
      method: ArtifactService.method.prepare,
      protocolName: "test",
      requestMethod: "POST",
      url: "http://localhost/v1/service-env/prepare",
      contextValues: createContextValues().set(workspaceContextKey, workspace),
    });

  it("admits local bytes up to the component limit (not the inline one) and reads them back", async () => {
    const bytes = component("tool", "internal", INLINE_LIMIT * 2);
    const record = await artifacts.admit("w", "tool", bytes);
    expect(record).toMatchObject({ kind: "tool", id: sha256(bytes), sizeBytes: bytes.byteLength, world: TOOL_WORLD });
    expect(await artifacts.get("w", "tool", record.id)).toEqual(record);
    expect(await artifacts.bytes(record.id)).toEqual(Buffer.from(bytes));
    await expect(artifacts.get("other", "tool", record.id)).rejects.toThrow(/is admitted in this workspace/);
    await expect(artifacts.bytes("../../etc/passwd")).rejects.toThrow(/sha256/);
  });

  it("returns a program's source only to its workspace", async () => {
    const record = await artifacts.admit("w", "program", new TextEncoder().encode("λ source"));
    expect(await artifacts.source("w", record.id)).toBe("λ source");
    await expect(artifacts.source("other", record.id)).rejects.toThrow(/is admitted in this workspace/);
    await expect(artifacts.admit("w", "program", new Uint8Array([0xc3]))).rejects.toThrow(/UTF-8/);
  });

  it("hands the preparer the workspace's records; its plain errors become preparation_failed, stable ones pass", async () => {
    const { id } = await artifacts.admit("w", "agentloop", component("agent-loop", "internal-loop"));
    const seen: string[][] = [];
    const fine: Preparer = { prepare: async (records) => void seen.push(records.map((r) => `${r.kind}:${r.id}`)) };
    const response = await artifacts.service(fine).prepare(create(PrepareRequestSchema, { agentloops: [id] }), context("w"));
    expect(response).toEqual({ artifacts: [{ id, kind: "agentloop", ready: true }] });
    expect(seen).toEqual([[`agentloop:${id}`]]);

    const broken: Preparer = { prepare: () => Promise.reject(new Error("worker 2 crashed while compiling")) };
    const failure = await stableCode(artifacts.service(broken).prepare(create(PrepareRequestSchema, { agentloops: [id] }), context("w")) as Promise<unknown>);
    expect(failure).toBe("preparation_failed");
    const busy: Preparer = { prepare: () => Promise.reject(serviceError("unavailable", "shutting down")) };
    expect(await stableCode(artifacts.service(busy).prepare(create(PrepareRequestSchema, { agentloops: [id] }), context("w")) as Promise<unknown>)).toBe(
      "unavailable",
    );
    expect(await stableCode(artifacts.service(fine).prepare(create(PrepareRequestSchema, { agentloops: [id] }), context("other")) as Promise<unknown>)).toBe(
      "not_found",
    );
  });
});
