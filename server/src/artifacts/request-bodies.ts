import { fromJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { HttpBody } from "../../../gen/google/api/httpbody_pb.js";
import {
  AdmitProgramRequestSchema,
  type AdmitAgentLoopRequestSchema,
  type AdmitProgramRequest,
  type AdmitToolRequestSchema,
} from "../../../gen/skillenv/env/v1/artifacts_pb.js";
import { serviceError } from "../errors/index.ts";
import type { ComponentSource } from "./admission.ts";

/** The fields AdmitToolRequest and AdmitAgentLoopRequest share. */
interface ComponentRequest {
  component?: HttpBody;
  assetSha256: string;
}

/**
 * Where the component comes from. The raw bytes arrive in `component` (the REST body or the
 * gRPC field); a JSON body there is the request itself in proto JSON, which is how the JSON API
 * refers to an uploaded asset with the same path that takes raw bytes.
 */
export function componentSource(request: ComponentRequest, schema: typeof AdmitToolRequestSchema | typeof AdmitAgentLoopRequestSchema): ComponentSource {
  refuseUnlabelledJson(request.component);
  const { component, assetSha256 }: ComponentRequest = jsonBody(request.component) ? parseJsonBody(schema, request.component) : request;
  const bytes = component?.data ?? new Uint8Array(0);
  if (bytes.byteLength > 0 && assetSha256 !== "") throw serviceError("invalid_argument", "send either the component bytes or assetSha256, not both");
  if (assetSha256 !== "") return { assetSha256 };
  if (bytes.byteLength === 0) {
    throw serviceError("invalid_argument", "no component: send its bytes (content-type: application/wasm) or the assetSha256 of an uploaded asset");
  }
  return { inline: bytes };
}

/** The program source as bytes: `source` text, or the raw `body`, whose JSON form is the request itself. */
export function programSource(request: AdmitProgramRequest): Uint8Array {
  const { source, body } = jsonBody(request.body) ? parseJsonBody(AdmitProgramRequestSchema, request.body) : request;
  const bytes = body?.data ?? new Uint8Array(0);
  if (source !== "" && bytes.byteLength > 0) throw serviceError("invalid_argument", "send either source or body, not both");
  // Decoding already refused strings that are not UTF-8 (proto binary and JSON alike).
  return source === "" ? bytes : new TextEncoder().encode(source);
}

/**
 * A component body that starts with "{" is a JSON request sent with another content type (curl -d
 * sends application/x-www-form-urlencoded): no component does (they start with \0asm), so the
 * refusal says what to send rather than what the bytes are not.
 */
function refuseUnlabelledJson(body: HttpBody | undefined): void {
  if (body === undefined || isJsonType(body.contentType)) return;
  const first = body.data.find((byte) => byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d);
  if (first !== 0x7b) return;
  throw serviceError(
    "malformed_request",
    `the body is JSON, but its content type is ${body.contentType || "missing"}: a JSON body needs content-type: application/json (a component's bytes go with content-type: application/wasm)`,
  );
}

function jsonBody(body: HttpBody | undefined): body is HttpBody {
  return body !== undefined && isJsonType(body.contentType);
}

function isJsonType(contentType: string): boolean {
  return contentType.split(";")[0]?.trim().toLowerCase() === "application/json";
}

function parseJsonBody<Desc extends DescMessage>(schema: Desc, body: HttpBody): MessageShape<Desc> {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(body.data);
    return fromJsonString(schema, text, { ignoreUnknownFields: false });
  } catch (error) {
    throw serviceError("malformed_request", `the JSON body is not a ${schema.name}: ${(error as Error).message}`);
  }
}
