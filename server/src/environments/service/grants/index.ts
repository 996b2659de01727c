import { covers, parseOrigin, requestOrigin } from "./origins.ts";

export { authorizeGrant, type GrantAllowLists, type GrantTarget } from "./authorize.ts";
export { parseGrants } from "./grant.ts";

/**
 * The per-request check of outgoing HTTP: whether `url` lies within the granted origins (granted `network`). Scheme, host and port must match exactly or fall under a granted
 * wildcard; URLs with userinfo, other schemes or unparseable text are refused.
 */
export function originAllowed(granted: readonly string[], url: string): boolean {
  const wanted = requestOrigin(url);
  if (wanted === undefined) return false;
  return granted.some((text) => {
    const allowed = parseOrigin(text);
    return allowed !== undefined && covers(allowed, wanted);
  });
}
