import { fromBinary, toJson, type DescMethod, type JsonWriteOptions } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { createAsyncIterable, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { describeError, RETRY_AFTER } from "../errors/index.ts";
import { HttpBodySchema } from "../../../gen/google/api/httpbody_pb.js";
import { isHttpBody } from "./fields.ts";

/**
 * Every field appears in JSON answers, unset ones with their default (as grpc-gateway v2 does):
 * an empty list is `[]` and a zero is `0`, not absent, so no client special-cases missing fields.
 */
export const JSON_WRITE_OPTIONS: Partial<JsonWriteOptions> = { alwaysEmitImplicit: true };

/** A complete HTTP response. */
export interface Reply {
  status: number;
  contentType: string;
  body: Uint8Array;
  /** When to ask again (seconds), for a refusal that says so: the `Retry-After` header. */
  retryAfter?: string | undefined;
}

/**
 * Decodes the handler's Connect unary response: the output message as proto JSON (or raw, for
 * google.api.HttpBody). A Connect error is thrown as the ConnectError it describes.
 */
export async function replyFromConnect(method: DescMethod, response: UniversalServerResponse): Promise<Reply> {
  const bytes = await readAll(response.body);
  if (response.status !== 200) {
    const fallback = new ConnectError(`HTTP ${response.status}`, codeFromHttpStatus(response.status));
    throw errorFromJsonBytes(bytes, response.header, fallback);
  }
  if (isHttpBody(method.output)) {
    const { contentType, data } = fromBinary(HttpBodySchema, bytes);
    return { status: 200, contentType: contentType || "application/octet-stream", body: data };
  }
  return jsonReply(200, toJson(method.output, fromBinary(method.output, bytes), JSON_WRITE_OPTIONS));
}

/** Errors use the API's JSON error shape and HTTP status from the error catalogue. */
export function errorReply(error: unknown): Reply {
  const { httpStatus, body } = describeError(error);
  // A refusal's Retry-After rides in the ConnectError's metadata (the Connect response's headers).
  const retryAfter = error instanceof ConnectError ? (error.metadata.get(RETRY_AFTER) ?? undefined) : undefined;
  return { ...jsonReply(httpStatus, body), retryAfter };
}

export function universalResponse(reply: Reply): UniversalServerResponse {
  const header = new Headers({ "content-type": reply.contentType, "content-length": String(reply.body.byteLength) });
  if (reply.retryAfter !== undefined) header.set(RETRY_AFTER, reply.retryAfter);
  return { status: reply.status, header, body: createAsyncIterable([reply.body]) };
}

function jsonReply(status: number, json: unknown): Reply {
  return { status, contentType: "application/json", body: new TextEncoder().encode(JSON.stringify(json)) };
}

async function readAll(body: AsyncIterable<Uint8Array> | undefined): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body ?? []) chunks.push(chunk);
  return Buffer.concat(chunks);
}
