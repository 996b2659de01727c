import type { Interceptor } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";
import type { ApiKeys } from "./api-keys.ts";
import { workspaceContextKey } from "./context.ts";

/**
 * Authenticates every call of the given services with `Authorization: Bearer <key>` and records
 * the key's workspace in the context. Services not listed (the gRPC health service) stay open.
 */
export function authInterceptor(keys: ApiKeys, publicServices: ReadonlySet<string>): Interceptor {
  return (next) => async (request) => {
    if (publicServices.has(request.service.typeName)) return next(request);
    const key = bearerKey(request.header.get("authorization"));
    const workspace = keys.workspaceOf(key);
    if (workspace === undefined) {
      throw serviceError("unauthenticated", "the API key is not valid");
    }
    request.contextValues.set(workspaceContextKey, workspace);
    return next(request);
  };
}

function bearerKey(header: string | null): string {
  const match = header === null ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) {
    throw serviceError("unauthenticated", "missing Authorization header; send Authorization: Bearer <api key>");
  }
  return match[1];
}
