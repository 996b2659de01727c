import { createFileRegistry, fromBinary, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createConnectRouter } from "@connectrpc/connect";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_SERVICES } from "../src/app.ts";
import { errorCatalogue } from "../src/errors/index.ts";
import { OPENAPI_FILE, OPENAPI_PATH, readComments, type Comments, type OpenApiDocument } from "../src/openapi/index.ts";
import { describeRule } from "../src/openapi/operations.ts";
import { SchemaSet } from "../src/openapi/schemas.ts";
import type { Operation, Parameter } from "../src/openapi/spec.ts";
import { buildRules, type Rule } from "../src/transcoder/rules.ts";
import { KEY_A, postJson, startTestService, type TestService } from "./helpers/service.ts";

const root = path.resolve(import.meta.dirname, "../..");
const committed = readFileSync(OPENAPI_FILE);
const document = JSON.parse(committed.toString("utf8")) as OpenApiDocument;

/** The rules the transcoder serves for these services (buildRules wants a handler per method; they are never called). */
function rulesOf(services: readonly DescService[]): Rule[] {
  const router = createConnectRouter();
  for (const service of services) router.service(service, {});
  return buildRules(services, router.handlers);
}

function operations(): Array<{ path: string; verb: string; operation: Operation }> {
  return Object.entries(document.paths).flatMap(([path, item]) => Object.entries(item).map(([verb, operation]) => ({ path, verb, operation })));
}

/** Resolves a local JSON pointer such as `#/components/schemas/skillenv.skills.v1.Skill`. */
function resolve(ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  return ref
    .slice(2)
    .split("/")
    .map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce<unknown>((node, token) => (node !== null && typeof node === "object" ? (node as Record<string, unknown>)[token] : undefined), document);
}

function refsIn(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(refsIn);
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([key, value]) => (key === "$ref" && typeof value === "string" ? [value] : refsIn(value)));
}

function schema(name: string): Record<string, any> {
  return document.components.schemas[name] as Record<string, any>;
}

describe("gen/openapi.json describes the JSON HTTP API the transcoder serves", () => {
  const rules = rulesOf(API_SERVICES);

  it("is an OpenAPI 3.1 document with the API key as bearer security", () => {
    expect(document.openapi).toBe("3.1.0");
    expect(document.info).toMatchObject({ title: "skillenv", version: expect.any(String) });
    expect(document.components.securitySchemes).toEqual({ apiKey: expect.objectContaining({ type: "http", scheme: "bearer" }) });
    expect(document.security).toEqual([{ apiKey: [] }]);
  });

  it("has one operation per transcoder rule, at the rule's path and HTTP method", () => {
    const described = operations().map(({ path, verb }) => `${verb.toUpperCase()} ${path}`);
    // Every variable of the API's templates is one segment, so a template reads as its OpenAPI path.
    const served = rules.map((rule) => `${rule.httpMethod} ${rule.template.source}`);
    expect(described.sort()).toEqual(served.sort());
    for (const rule of rules) {
      const operation = document.paths[rule.template.source]?.[rule.httpMethod.toLowerCase() as "get"];
      expect(operation?.operationId).toBe(`${rule.method.parent.name}_${rule.method.name}`);
      expect(operation?.tags).toEqual([rule.method.parent.typeName]);
    }
  });

  it("declares each path variable as a required path parameter, and nothing else as one", () => {
    for (const { path, operation } of operations()) {
      const variables = [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]);
      const inPath = operation.parameters.filter((parameter) => parameter.in === "path");
      expect(
        inPath.map((parameter) => parameter.name),
        path,
      ).toEqual(variables);
      expect(inPath.every((parameter) => parameter.required)).toBe(true);
    }
  });

  it("takes query parameters only where the body is not the whole message", () => {
    for (const rule of rules) {
      const operation = document.paths[rule.template.source]?.[rule.httpMethod.toLowerCase() as "get"];
      const query = operation?.parameters.filter((parameter) => parameter.in === "query").map((parameter) => parameter.name);
      if (rule.body === "*") expect(query).toEqual([]);
    }
    const listSkills = document.paths["/skills"]?.get;
    expect(listSkills?.parameters.map((parameter) => parameter.name)).toEqual(["pageSize", "pageToken"]);
  });

  it("resolves every $ref, and names every operation once", () => {
    const refs = refsIn(document);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) expect(resolve(ref), ref).toBeDefined();
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("writes schemas in the proto3 JSON mapping, with the protos' comments as descriptions", () => {
    const skill = schema("skillenv.skills.v1.Skill");
    expect(skill.description).toMatch(/^Skill /);
    expect(skill.properties.bundleBytes).toMatchObject({ type: "string", format: "int64" });
    expect(skill.properties.createdAt).toMatchObject({ type: "string", format: "date-time" });
    expect(skill.properties.contentHash.description).toBeTruthy();
    const placement = schema("skillenv.sessions.v1.ToolPlacement");
    expect(placement.properties.inputSchema).toMatchObject({ type: "object" }); // google.protobuf.Struct
    expect(placement.properties.configuration).not.toHaveProperty("type"); // google.protobuf.Value: any JSON
    expect(schema("skillenv.sessions.v1.RunInput").properties.providerKeys).toMatchObject({ type: "object", additionalProperties: { type: "string" } });
  });

  it("leaves fields the path binds out of a whole-message body", () => {
    const bodyOf = (operation: Operation | undefined) => operation?.requestBody?.content["application/json"]?.schema as Record<string, any>;
    expect(Object.keys(bodyOf(document.paths["/skills/{name}"]?.put).properties)).toEqual(["contentHash"]);
    const callTool = bodyOf(document.paths["/v1/sessions/{session_id}/tools/{tool}:call"]?.post);
    expect(Object.keys(callTool.properties)).toEqual(["input", "timeout"]);
    expect(callTool.properties.timeout).toMatchObject({ type: "string", pattern: expect.any(String) }); // google.protobuf.Duration
  });

  it("takes google.api.HttpBody bodies raw and answers server streams as server-sent events", () => {
    expect(document.paths["/v1/tools"]?.post?.requestBody?.content).toEqual({ "*/*": {} });
    const watch = document.paths["/v1/sessions/{session_id}/events"]?.get?.responses["200"];
    // The schema is one event's: its data the streamed message, or the Error body that ends the stream.
    expect(watch).toMatchObject({
      content: {
        "text/event-stream": {
          schema: {
            type: "object",
            required: ["data"],
            properties: {
              event: { enum: ["error"] },
              data: { anyOf: [{ $ref: "#/components/schemas/skillenv.sessions.v1.WatchSessionResponse" }, { $ref: "#/components/schemas/Error" }] },
            },
          },
        },
      },
    });
  });

  it("answers errors with the catalogue's codes in the {code, message, status} body", () => {
    const error = schema("Error");
    expect(error.required).toEqual(["code", "message", "status"]);
    // Open: today's codes are listed, and a client must take a code it does not know.
    expect(error.properties.code).not.toHaveProperty("enum");
    expect(error.properties.code["x-extensible-enum"]).toEqual(Object.keys(errorCatalogue));
    for (const { operation } of operations()) {
      expect(operation.responses["4XX"]).toEqual({ $ref: "#/components/responses/Error" });
      expect(operation.responses["5XX"]).toEqual({ $ref: "#/components/responses/Error" });
    }
  });

  it("names its server (relative: the one serving it) and marks every request body required", () => {
    expect(document.servers).toEqual([{ url: "/", description: expect.any(String) }]);
    const bodies = operations().flatMap(({ operation }) => (operation.requestBody ? [operation.requestBody] : []));
    expect(bodies.length).toBeGreaterThan(5);
    for (const body of bodies) expect(body.required).toBe(true);
  });
});

describe("the service serves the document", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it(`at GET ${OPENAPI_PATH}, without an API key, as committed`, async () => {
    const response = await fetch(service.url + OPENAPI_PATH);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(Buffer.from(await response.arrayBuffer()).equals(committed)).toBe(true);
  });

  it("for GET only: other methods reach the API's routing", async () => {
    const posted = await postJson(service.url, OPENAPI_PATH, {}, KEY_A);
    expect(posted).toMatchObject({ status: 404, body: { code: "route_not_found" } });
  });
});

describe("rules the API does not use yet (the transcoder's test protos)", () => {
  // Built with their comments by buf, like scripts/openapi.ts builds the API's.
  const set = fromBinary(
    FileDescriptorSetSchema,
    execFileSync(path.join(root, "node_modules/.bin/buf"), ["build", "server/test/proto", "--as-file-descriptor-set", "-o", "-"], { cwd: root }),
  );
  const fixture = createFileRegistry(set).getService("skillenv.testing.v1.TranscodingTestService");
  if (fixture === undefined) throw new Error("no TranscodingTestService in server/test/proto");
  const comments: Comments = readComments(set);
  const rules = rulesOf([fixture]);
  const schemas = new SchemaSet(comments);
  const describing = (httpMethod: string, source: string) => {
    const rule = rules.find((candidate) => candidate.httpMethod === httpMethod && candidate.template.source === source);
    if (rule === undefined) throw new Error(`no rule ${httpMethod} ${source}`);
    return () => describeRule(rule, "id", schemas, comments);
  };
  const query = (parameters: Parameter[]) => Object.fromEntries(parameters.filter((p) => p.in === "query").map((p) => [p.name, p.schema]));

  it("query parameters: primitive and repeated primitive fields, nested ones dotted, never maps or repeated messages", () => {
    const { operation } = describing("GET", "/v1/users/{user_id}/messages/{message_id}")();
    expect(operation.description).toMatch(/^GetMessage maps a resource name/);
    expect(query(operation.parameters)).toEqual({
      name: { type: "string" },
      revision: { type: "string", format: "int64" },
      "sub.subfield": { type: "string" },
      tags: { type: "array", items: { type: "string" } },
      verbose: { type: "boolean" },
      kind: { $ref: "#/components/schemas/skillenv.testing.v1.Kind" },
      kinds: { type: "array", items: { $ref: "#/components/schemas/skillenv.testing.v1.Kind" } },
      ratio: { type: "number", format: "double" },
      limit: { type: "integer", format: "int32" },
    });
    expect(schemas.components()["skillenv.testing.v1.Kind"]).toEqual({
      type: "string",
      enum: ["KIND_UNSPECIFIED", "KIND_ALPHA", "KIND_BETA"],
      description: "Kind is an enum for query parameter tests.",
    });
  });

  it("a body field: its JSON is the body, the rest of the unbound fields are the query", () => {
    const { operation } = describing("PATCH", "/v1/messages/{message_id}")();
    expect(operation.requestBody?.content["application/json"]?.schema).toMatchObject({ $ref: "#/components/schemas/skillenv.testing.v1.Message" });
    expect(Object.keys(query(operation.parameters))).toEqual(["allowMissing"]);
  });

  it("raw google.api.HttpBody bodies and answers", () => {
    const upload = describing("POST", "/v1/blobs/{name}")().operation;
    expect(upload.requestBody?.content).toEqual({ "*/*": {} });
    expect(Object.keys(query(upload.parameters))).toEqual(["note"]);
    const echo = describing("POST", "/v1/raw:echo")();
    expect(echo.path).toBe("/v1/raw:echo");
    expect(echo.operation.responses["200"]).toMatchObject({ content: { "*/*": {} } });
  });

  it("refuses what an OpenAPI document cannot say: multi-segment variables and custom HTTP methods", () => {
    expect(describing("GET", "/v1/{name=messages/*}")).toThrow(/holds one path segment/);
    expect(describing("GET", "/v1/buckets/{bucket}/objects/{object=**}")).toThrow(/holds one path segment/);
    expect(describing("PURGE", "/v1/{name=operations/**}")).toThrow(/custom HTTP method PURGE/);
  });
});
