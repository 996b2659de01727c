import {
  create,
  mergeFromJson,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  type Message,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { assertByteStreamRequest, type UniversalServerRequest } from "@connectrpc/connect/protocol";
import { serviceError } from "../errors/index.ts";
import { HttpBodySchema } from "../../../gen/google/api/httpbody_pb.js";
import { isQueryLeaf, resolveFieldPath, sameFieldPath, setJsonPath, textToJson, type FieldPath } from "./fields.ts";
import type { Rule } from "./rules.ts";

/** The parts of an HTTP request that carry fields of the request message. */
export interface HttpRequestParts {
  pathValues: ReadonlyMap<string, string>;
  query: URLSearchParams;
  body: Uint8Array;
  contentType: string;
}

/**
 * Reads the whole body, up to maxBytes. A larger declared Content-Length is refused before reading;
 * past the limit reading stops at once, leaving the rest to the body's owner to drain.
 */
export async function readBody(request: UniversalServerRequest, maxBytes: number): Promise<Uint8Array> {
  assertByteStreamRequest(request);
  if (Number(request.header.get("content-length")) > maxBytes) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function tooLarge(maxBytes: number): ConnectError {
  return serviceError("payload_too_large", `the request body exceeds ${maxBytes} bytes`);
}

/**
 * Builds the request message: body first, then query, then path variables, so the path wins over
 * a body "*" that repeats a path field. Any decoding failure is malformed_request.
 */
export function buildRequestMessage(rule: Rule, parts: HttpRequestParts): Message {
  const schema = rule.method.input;
  try {
    const message = create(schema, rawBodyInit(rule, parts));
    const merge = (json: JsonValue) => mergeFromJson(schema, message, json, { ignoreUnknownFields: false });
    if (!rule.rawBody && rule.body !== undefined && parts.body.length > 0) merge(bodyJson(rule.body, parts.body));
    merge(queryJson(rule, parts.query));
    merge(pathJson(rule, parts.pathValues));
    return message;
  } catch (error) {
    throw serviceError("malformed_request", (error as Error).message);
  }
}

/** google.api.HttpBody takes the bytes as they are, with the request's Content-Type. */
function rawBodyInit(rule: Rule, parts: HttpRequestParts): MessageInitShape<DescMessage> | undefined {
  if (!rule.rawBody || rule.body === undefined) return undefined;
  const httpBody = create(HttpBodySchema, { contentType: parts.contentType, data: parts.body });
  return rule.body === "*" ? httpBody : { [rule.body.localName]: httpBody };
}

function bodyJson(target: "*" | DescField, body: Uint8Array): JsonValue {
  const json = parseJson(body);
  return target === "*" ? json : { [target.jsonName]: json };
}

function parseJson(body: Uint8Array): JsonValue {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body)) as JsonValue;
  } catch {
    throw new Error("the request body is not valid JSON");
  }
}

/**
 * Query parameters set the fields bound neither by the path nor by the body. With body "*" every
 * unbound field is in the body, so http.proto allows no query parameters: they are rejected rather
 * than silently dropped.
 */
function queryJson(rule: Rule, query: URLSearchParams): JsonObject {
  if (rule.body === "*" && query.size > 0) throw new Error(`query parameters are not allowed: the body carries every field`);
  const json: JsonObject = {};
  for (const [name, value] of query) {
    const path = queryField(rule, name);
    setJsonPath(json, path, textToJson(path.leaf, value));
  }
  return json;
}

function queryField(rule: Rule, name: string): FieldPath {
  const path = resolveFieldPath(rule.method.input, name.split("."));
  if (path === undefined || !isQueryLeaf(path.leaf)) throw new Error(`unknown query parameter "${name}"`);
  const first = path.parents[0] ?? path.leaf;
  const inPath = [...rule.pathFields.values()].some((bound) => sameFieldPath(bound, path));
  if (inPath || first === rule.body) throw new Error(`query parameter "${name}" sets a field bound by the path or body`);
  return path;
}

function pathJson(rule: Rule, pathValues: ReadonlyMap<string, string>): JsonObject {
  const json: JsonObject = {};
  for (const [name, value] of pathValues) {
    const path = rule.pathFields.get(name);
    if (path !== undefined) setJsonPath(json, path, textToJson(path.leaf, value));
  }
  return json;
}
