import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { isHttpBody, isQueryLeaf, sameFieldPath, type FieldPath } from "../transcoder/fields.ts";
import type { PathTemplate } from "../transcoder/path-template.ts";
import type { Rule } from "../transcoder/rules.ts";
import type { Comments } from "./comments.ts";
import { fieldComment, type JsonSchema, type SchemaSet } from "./schemas.ts";
import type { HttpVerb, Operation, Parameter, RequestBody, Response } from "./spec.ts";

/** The error response every operation shares (components.responses). */
export const ERROR_RESPONSE_REF = "#/components/responses/Error";
/** The error body (components.schemas). */
export const ERROR_SCHEMA_REF = "#/components/schemas/Error";

/** One transcoder rule as an OpenAPI operation, at its path and HTTP method. */
export interface DescribedRule {
  path: string;
  verb: HttpVerb;
  operation: Operation;
}

const VERBS: ReadonlySet<string> = new Set<HttpVerb>(["get", "put", "post", "delete", "patch"]);

/** The error responses every operation shares: 4XX and 5XX, each code's status in the catalogue. */
const ERROR_RESPONSES = { "4XX": { $ref: ERROR_RESPONSE_REF }, "5XX": { $ref: ERROR_RESPONSE_REF } } as const;

const EVENT_STREAM =
  "Server-sent events. The schema is one event's (OpenAPI 3.1 has no keyword for the items of a stream; 3.2's itemSchema is this): " +
  "one `data:` event per streamed message, its JSON the message; an error that ends the stream is an `event: error` whose data is the Error body.";

/** Describes a rule: path and method from its binding, parameters and body from its field bindings. */
export function describeRule(rule: Rule, operationId: string, schemas: SchemaSet, comments: Comments): DescribedRule {
  const { method } = rule;
  const where = `google.api.http of ${method.parent.typeName}.${method.name} (${rule.httpMethod} ${rule.template.source})`;
  const verb = rule.httpMethod.toLowerCase();
  if (!isVerb(verb)) throw new Error(`${where}: OpenAPI cannot describe the custom HTTP method ${rule.httpMethod}`);
  const operation: Operation = {
    operationId,
    summary: method.name,
    description: comments.get(`${method.parent.typeName}.${method.name}`),
    tags: [method.parent.typeName],
    parameters: [...pathParameters(rule, schemas, comments), ...queryParameters(rule, schemas, comments)],
    requestBody: requestBody(rule, schemas, comments),
    responses: { "200": success(rule, schemas, comments), ...ERROR_RESPONSES },
  };
  return { path: openApiPath(rule.template, where), verb, operation };
}

function isVerb(verb: string): verb is HttpVerb {
  return VERBS.has(verb);
}

/**
 * `/v1/sessions/{session_id}/runs/{run_id}:cancel` stays as it is. A variable must be one segment:
 * an OpenAPI path parameter never holds a "/", so `{name=shelves/*}` or `**` have no OpenAPI form.
 */
function openApiPath(template: PathTemplate, where: string): string {
  const { segments, variables, verb } = template;
  if (!variables.every((variable) => variable.end === variable.start + 1 && segments[variable.start]?.kind === "wildcard")) {
    throw new Error(`${where}: an OpenAPI path parameter holds one path segment, so a variable must be a single "*"`);
  }
  const variableAt = new Map(variables.map((variable) => [variable.start, variable]));
  const parts = segments.map((segment, i) => {
    const variable = variableAt.get(i);
    if (variable !== undefined) return `{${variable.fieldPath.join(".")}}`;
    if (segment.kind === "literal") return segment.value;
    throw new Error(`${where}: a wildcard outside a variable has no OpenAPI form`);
  });
  return `/${parts.join("/")}${verb === undefined ? "" : `:${verb}`}`;
}

function pathParameters(rule: Rule, schemas: SchemaSet, comments: Comments): Parameter[] {
  return [...rule.pathFields].map(([name, path]) => parameter(name, "path", path.leaf, schemas, comments));
}

/** The fields neither the path nor the body binds; with body "*" the body binds them all. */
function queryParameters(rule: Rule, schemas: SchemaSet, comments: Comments): Parameter[] {
  if (rule.body === "*") return [];
  const name = (path: FieldPath) => [...path.parents, path.leaf].map((field) => field.jsonName).join(".");
  return [...queryFields(rule, rule.method.input, [])].map((path) => parameter(name(path), "query", path.leaf, schemas, comments));
}

/**
 * What the transcoder takes from the query: primitive and repeated primitive fields, also inside
 * singular messages (`sub.subfield`), except the body field and fields the path binds.
 */
function* queryFields(rule: Rule, message: DescMessage, parents: DescField[]): Iterable<FieldPath> {
  for (const field of message.fields) {
    if (parents.length === 0 && field === rule.body) continue;
    const path = { parents, leaf: field };
    if (isQueryLeaf(field)) {
      if (![...rule.pathFields.values()].some((bound) => sameFieldPath(bound, path))) yield path;
    } else if (field.fieldKind === "message" && !parents.some((parent) => parent.message === field.message)) {
      yield* queryFields(rule, field.message, [...parents, field]);
    }
  }
}

function parameter(name: string, location: Parameter["in"], field: DescField, schemas: SchemaSet, comments: Comments): Parameter {
  return { name, in: location, required: location === "path", description: fieldComment(comments, field), schema: schemas.value(field) };
}

/**
 * The body field's JSON, or the whole message's without the fields the path binds. A
 * google.api.HttpBody body is the raw bytes, of any content type.
 */
function requestBody(rule: Rule, schemas: SchemaSet, comments: Comments): RequestBody | undefined {
  const { body } = rule;
  if (body === undefined) return undefined;
  const description = body === "*" ? comments.get(rule.method.input.typeName) : fieldComment(comments, body);
  // Required: a client sends one (`{}` for a message of defaults), though the transcoder reads none as an empty message.
  if (rule.rawBody) return { description, required: true, content: { "*/*": {} } };
  return { description, required: true, content: { "application/json": { schema: bodySchema(rule, body, schemas) } } };
}

function bodySchema(rule: Rule, body: "*" | DescField, schemas: SchemaSet): JsonSchema {
  if (body !== "*") return schemas.field(body);
  const inPath = [...rule.pathFields.values()].filter((path) => path.parents.length === 0).map((path) => path.leaf);
  return inPath.length === 0 ? schemas.message(rule.method.input) : schemas.object(rule.method.input, inPath);
}

function success(rule: Rule, schemas: SchemaSet, comments: Comments): Response {
  const { output } = rule.method;
  const description = comments.get(output.typeName) ?? output.name;
  if (rule.streaming) {
    const event: JsonSchema = {
      type: "object",
      description: EVENT_STREAM,
      required: ["data"],
      properties: {
        event: { type: "string", enum: ["error"], description: "Only on the error that ends the stream." },
        data: { anyOf: [schemas.message(output), { $ref: ERROR_SCHEMA_REF }], description: "The streamed message, or on `event: error` the Error body." },
      },
    };
    return { description, content: { "text/event-stream": { schema: event } } };
  }
  if (isHttpBody(output)) return { description, content: { "*/*": {} } };
  return { description, content: { "application/json": { schema: schemas.message(output) } } };
}
