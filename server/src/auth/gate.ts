import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { serviceError } from "../errors/index.ts";
import type { ApiKeys } from "./api-keys.ts";
import { workspaceContextKey } from "./context.ts";
import type { WorkspaceRateLimiter } from "./workspace-rate.ts";

/** Connect's request gate: runs once a call's headers are in, before any of its body is read. */
export type RequestGate = NonNullable<UniversalHandlerOptions["requestGate"]>;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * How many distinct Authorization headers that carried a valid key are remembered. A client sends
 * the same header on every call, so a handful covers every caller of a deployment; the bound only
 * matters against a key holder who varies the header's spelling.
 */
const VERIFIED_HEADERS = 64;

/**
 * Authenticates every call with `Authorization: Bearer <key>` and records the key's workspace in
 * the context: the one place a workspace is set. Services listed as public (the gRPC health
 * service) stay open. As a request gate it refuses before the body is read, so a caller without a
 * key cannot make the server read, buffer or parse a body; the refusal leaves in the protocol's
 * own format (gRPC trailers-only, Connect JSON, REST JSON through the transcoder). A workspace
 * past its share of the server (`rates`) is refused here too, its refusal held a while first.
 */
export function authenticationGate(keys: ApiKeys, publicServices: ReadonlySet<string>, rates?: WorkspaceRateLimiter): RequestGate {
  const workspaceOf = bearerAuthenticator(keys);
  return (context) => {
    if (publicServices.has(context.service.typeName)) return;
    const workspace = workspaceOf(context.requestHeader.get("authorization"));
    context.values.set(workspaceContextKey, workspace);
    // A refusal may be held before it is answered (WorkspaceRateLimiter.admitOrHold).
    if (rates?.enabled) return rates.admitOrHold(workspace, context.signal);
  };
}

/**
 * The workspace of an Authorization header (`Bearer <key>`), or the `unauthenticated` refusal:
 * the one check behind the request gate and the endpoints outside Connect (the MCP endpoint).
 */
export function bearerAuthenticator(keys: ApiKeys): (header: string | null | undefined) => string {
  const verified = new VerifiedHeaders(VERIFIED_HEADERS);
  return (header) => {
    if (header === null || header === undefined) throw unauthenticated("missing Authorization header");
    const remembered = verified.workspaceOf(header);
    if (remembered !== undefined) return remembered;
    const workspace = keys.workspaceOf(bearerKey(header));
    if (workspace === undefined) throw serviceError("unauthenticated", "the API key is not valid");
    verified.remember(header, workspace);
    return workspace;
  };
}

function bearerKey(header: string): string {
  const key = BEARER.exec(header)?.[1];
  if (key !== undefined) return key;
  throw unauthenticated(/^Bearer\b/i.test(header) ? "the Authorization header has no key" : "the Authorization scheme must be Bearer");
}

function unauthenticated(problem: string) {
  return serviceError("unauthenticated", `${problem}; send Authorization: Bearer <api key>`);
}

/**
 * Authorization headers whose key has been verified, with its workspace, so that a known caller's
 * key is not hashed and compared again on every call (SHA-256 and a comparison with every key).
 * Only headers that passed ApiKeys' constant-time check are ever added: an unknown key always
 * takes that check, whatever it shares with a remembered one. (A lookup compares strings only
 * when their hashes match, and what a hit reveals, that the header is valid, the answer says
 * anyway.) The oldest entry makes room for a new one.
 */
class VerifiedHeaders {
  readonly #capacity: number;
  readonly #workspaces = new Map<string, string>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  workspaceOf(header: string): string | undefined {
    return this.#workspaces.get(header);
  }

  remember(header: string, workspace: string): void {
    if (this.#workspaces.size >= this.#capacity) this.#workspaces.delete(this.#workspaces.keys().next().value!);
    this.#workspaces.set(header, workspace);
  }
}
