// origins.ts alone: the config index also brings in the settings (and through them the client's
// bundle limits), which a worker never uses.
import { originAllowed } from "../../config/origins.ts";

/**
 * The one place an outgoing guest request is checked: `scheme://authority` must lie within the
 * granted origins (exact, or a granted `https://*.<domain>` wildcard). Called before the shim
 * creates any connection; a request without an authority is refused.
 */
export function requestAllowed(granted: readonly string[], scheme: string, authority: string | undefined): boolean {
  if (granted.length === 0 || !authority) return false;
  if (scheme !== "http" && scheme !== "https") return false;
  // The shim already refuses authorities that are not host[:port]; anything that would change
  // how the URL parses (userinfo, path, query) is refused here too.
  if (/[@/?#\\\s]/.test(authority)) return false;
  return originAllowed(granted, `${scheme}://${authority}/`);
}

/** The scheme of a wasi:http outgoing-request (`none` means https in the shim). */
export function schemeOf(scheme: { tag: string; val?: string } | undefined): string {
  if (!scheme) return "https";
  switch (scheme.tag) {
    case "HTTP":
      return "http";
    case "HTTPS":
      return "https";
    default:
      return String(scheme.val ?? "").toLowerCase();
  }
}
