import { describeError, serviceError } from "../errors/index.ts";
import type { NodeRequest, NodeResponse } from "./node-types.ts";

/** The liveness and readiness paths load balancers and orchestrators probe (docs/operations.md). */
export const LIVENESS_PATH = "/livez";
export const READINESS_PATH = "/readyz";

export function isProbePath(pathname: string): boolean {
  return pathname === LIVENESS_PATH || pathname === READINESS_PATH;
}

/** What the probes report: "ready", or why the server is not. */
export type ReadinessOf = () => string;

/**
 * Answers a probe, when the request is one: `GET /livez` 200 whenever the server answers at all;
 * `GET /readyz` 200 when ready, else 503; both with `{"status": ...}`. Anyone may ask, no key.
 */
export function answerProbe(req: NodeRequest, res: NodeResponse, pathname: string, readiness: ReadinessOf): boolean {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  if (pathname === LIVENESS_PATH) {
    writeProbe(res, req.method === "HEAD", 200, { status: "live" });
    return true;
  }
  if (pathname === READINESS_PATH) {
    const status = readiness();
    writeProbe(res, req.method === "HEAD", status === "ready" ? 200 : 503, { status });
    return true;
  }
  return false;
}

/**
 * The listener while the server starts (storage, migrations, the preparation file, resumed runs):
 * the probes answer, every other request is refused `unavailable` (503), so that a client or load
 * balancer learns the server is there and not ready, rather than finding no port.
 */
export function startingListener(readiness: ReadinessOf): (req: NodeRequest, res: NodeResponse) => void {
  const { body, httpStatus } = describeError(serviceError("unavailable", "the server is starting; retry shortly"));
  const refusal = Buffer.from(JSON.stringify(body));
  return (req, res) => {
    // Nothing of a refused request is read; its body is dropped with the connection's flow.
    req.resume();
    if (answerProbe(req, res, new URL(req.url ?? "/", "http://localhost").pathname, readiness)) return;
    res.statusCode = httpStatus;
    res.setHeader("content-type", "application/json");
    res.setHeader("content-length", refusal.byteLength);
    res.end(refusal);
  };
}

function writeProbe(res: NodeResponse, head: boolean, status: number, json: object): void {
  const bytes = Buffer.from(JSON.stringify(json));
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  res.setHeader("cache-control", "no-store");
  res.setHeader("content-length", bytes.byteLength);
  if (head) res.end();
  else res.end(bytes);
}
