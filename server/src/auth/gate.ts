import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { serviceError } from "../errors/index.ts";
import type { ApiKeys } from "./api-keys.ts";
import { workspaceContextKey } from "./context.ts";

/** Connect's request gate: runs once a call's headers are in, before any of its body is read. */
export type RequestGate = NonNullable<UniversalHandlerOptions["requestGate"]>;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Authenticates every call with `Authorization: Bearer <key>` and records the key's workspace in
 * the context: the one place a workspace is set. Services listed as public (the gRPC health
 * service) stay open. As a request gate it refuses before the body is read, so a caller without a
 * key cannot make the server read, buffer or parse a body; the refusal leaves in the protocol's
 * own format (gRPC trailers-only, Connect JSON, REST JSON through the transcoder).
 */
export function authenticationGate(keys: ApiKeys, publicServices: ReadonlySet<string>): RequestGate {
  return (context) => {
    if (publicServices.has(context.service.typeName)) return;
    const workspace = keys.workspaceOf(bearerKey(context.requestHeader.get("authorization")));
    if (workspace === undefined) throw serviceError("unauthenticated", "the API key is not valid");
    context.values.set(workspaceContextKey, workspace);
  };
}

function bearerKey(header: string | null): string {
  const key = header === null ? undefined : BEARER.exec(header)?.[1];
  if (key !== undefined) return key;
  const problem =
    header === null ? "missing Authorization header" : /^Bearer\b/i.test(header) ? "the Authorization header has no key" : "the Authorization scheme must be Bearer";
  throw serviceError("unauthenticated", `${problem}; send Authorization: Bearer <api key>`);
}
