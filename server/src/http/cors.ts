import { cors as connectCors } from "@connectrpc/connect";
import type { NodeRequest, NodeResponse } from "./node-types.ts";

const ALLOWED_METHODS = [...new Set([...connectCors.allowedMethods, "GET", "POST", "PUT", "PATCH", "DELETE"])].join(", ");

/**
 * CORS for browsers (Connect-Web, fetch). Keys travel in the Authorization header, never in
 * cookies, so allowing an origin grants it nothing a page could not already do with a key.
 * Returns true when it answered a preflight.
 */
export function applyCors(req: NodeRequest, res: NodeResponse, allowedOrigins: readonly string[], extraHeaders: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || !(allowedOrigins.includes("*") || allowedOrigins.includes(origin))) return false;
  res.setHeader("access-control-allow-origin", allowedOrigins.includes("*") ? "*" : origin);
  res.setHeader("vary", "origin");
  res.setHeader("access-control-expose-headers", connectCors.exposedHeaders.join(", "));
  if (req.method !== "OPTIONS" || req.headers["access-control-request-method"] === undefined) return false;
  res.setHeader("access-control-allow-methods", ALLOWED_METHODS);
  res.setHeader("access-control-allow-headers", [...connectCors.allowedHeaders, "Authorization", ...extraHeaders].join(", "));
  res.setHeader("access-control-max-age", "7200");
  res.statusCode = 204;
  res.end();
  return true;
}
