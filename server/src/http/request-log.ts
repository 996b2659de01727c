import { createContextKey } from "@connectrpc/connect";
import type { NodeRequest } from "./node-types.ts";

/** What one request's log line says; filled in as the request passes through the layers. */
export interface RequestRecord {
  protocol: "grpc" | "grpc-web" | "connect" | "rest" | "object-store" | "http";
  method: string;
  path: string;
  procedure?: string;
  workspace?: string;
  /** Stable error code, or "ok". */
  code: string;
  httpStatus?: number;
}

export const requestRecordKey = createContextKey<RequestRecord | undefined>(undefined, { description: "request record" });

export function protocolOf(req: NodeRequest): RequestRecord["protocol"] {
  const type = req.headers["content-type"] ?? "";
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  if (type.startsWith("application/connect+") || req.headers["connect-protocol-version"] !== undefined) return "connect";
  return "http";
}

export type LogSink = (line: string) => void;

/** One JSON line per request. Nothing secret goes in: no headers, no bodies, no query strings. */
export function logRequest(sink: LogSink, record: RequestRecord, startedAt: bigint): void {
  const durationMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
  sink(JSON.stringify({ time: new Date().toISOString(), ...record, durationMs: Math.round(durationMs * 1000) / 1000 }));
}
