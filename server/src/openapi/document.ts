import type { DescService } from "@bufbuild/protobuf";
import { createConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { errorCatalogue } from "../errors/index.ts";
import { buildRules } from "../transcoder/rules.ts";
import type { Comments } from "./comments.ts";
import { describeRule, ERROR_SCHEMA_REF } from "./operations.ts";
import { SchemaSet, type JsonSchema } from "./schemas.ts";
import type { OpenApiDocument, PathItem, Response } from "./spec.ts";

export interface OpenApiOptions {
  /** The services whose google.api.http rules the transcoder serves, in the order to list them. */
  services: readonly DescService[];
  /** Descriptions of the proto declarations (readComments). */
  comments: Comments;
  title: string;
  version: string;
}

const DESCRIPTION =
  "The JSON HTTP API: the google.api.http rules of the protos, served by the transcoder on the same port as " +
  "gRPC, gRPC-Web and Connect. Messages follow the proto3 JSON mapping, every field written. docs/api.md has the wire contracts.";

const SECURITY_SCHEME = "apiKey";

/** Every stable code the JSON API answers with, and the Connect code names beside them; docs/errors.md explains each. */
const ERROR_SCHEMA: JsonSchema = {
  type: "object",
  required: ["code", "message", "status"],
  properties: {
    // Open: a code added later is not a closed enum's violation to a strict generated client. The
    // codes of today are x-extensible-enum's (Zalando's convention, which generators read as a string).
    code: {
      type: "string",
      "x-extensible-enum": Object.keys(errorCatalogue),
      description: "The stable error code (docs/errors.md); new codes may be added, so a client must accept one it does not know.",
    },
    message: { type: "string", description: "For people; its wording may change." },
    status: { type: "string", enum: [...new Set(Object.values(errorCatalogue).map((spec) => codeToString(spec.code)))], description: "The Connect code name." },
  },
};

const ERROR_RESPONSE: Response = {
  description: "A refusal, with the HTTP status of its code in the error catalogue (docs/errors.md).",
  content: { "application/json": { schema: { $ref: ERROR_SCHEMA_REF } } },
};

/**
 * The OpenAPI 3.1 document of the JSON HTTP API, from the same descriptors and google.api.http rules
 * the transcoder serves (server/src/transcoder rules.ts and path-template.ts read them).
 */
export function buildOpenApi(options: OpenApiOptions): OpenApiDocument {
  const { services, comments } = options;
  const rules = buildRules(services, unservedHandlers(services));
  const schemas = new SchemaSet(comments);
  const operationIds = new Map<string, number>();
  const paths: Record<string, PathItem> = {};
  for (const method of services.flatMap((service) => service.methods)) {
    for (const rule of rules.filter((candidate) => candidate.method === method)) {
      const { path, verb, operation } = describeRule(rule, nextOperationId(operationIds, `${method.parent.name}_${method.name}`), schemas, comments);
      const item = (paths[path] ??= {});
      if (item[verb] !== undefined) throw new Error(`${verb.toUpperCase()} ${path} is bound twice`);
      item[verb] = operation;
    }
  }
  return {
    openapi: "3.1.0",
    info: { title: options.title, version: options.version, description: DESCRIPTION },
    // Relative: the server that serves this document (at /openapi.json) serves the API on the same origin.
    servers: [{ url: "/", description: "The server that serves this document, on the same port as gRPC, gRPC-Web and Connect." }],
    tags: services
      .filter((service) => rules.some((rule) => rule.method.parent === service))
      .map((service) => ({ name: service.typeName, description: comments.get(service.typeName) })),
    paths,
    components: {
      schemas: { ...schemas.components(), Error: ERROR_SCHEMA },
      responses: { Error: ERROR_RESPONSE },
      securitySchemes: { [SECURITY_SCHEME]: { type: "http", scheme: "bearer", description: "An API key; each key belongs to one workspace." } },
    },
    security: [{ [SECURITY_SCHEME]: [] }],
  };
}

/** Additional bindings of a method get numbered ids after the first: Method, Method_1, ... */
function nextOperationId(taken: Map<string, number>, base: string): string {
  const count = taken.get(base) ?? 0;
  taken.set(base, count + 1);
  return count === 0 ? base : `${base}_${count}`;
}

/** buildRules binds every rule to the Connect handler serving it; a document serves nothing, so unimplemented ones stand in. */
function unservedHandlers(services: readonly DescService[]): UniversalHandler[] {
  const router = createConnectRouter();
  for (const service of services) router.service(service, {});
  return router.handlers;
}
