import { createContextKey } from "@connectrpc/connect";
import type { NodeRequest } from "./node-types.ts";

/** What one request's log line says; filled in as the request passes through the layers. */
export interface RequestRecord {
  protocol: "grpc" | "grpc-web" | "connect" | "rest" | "object-store" | "mcp" | "http";
  method: string;
  path: string;
  procedure?: string;
  workspace?: string;
  /** Stable error code, or "ok". */
  code: string;
  httpStatus?: number;
  /** Bytes of an API method's response body (Connect protocols and REST), as sent. */
  responseBytes?: number;
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

/** Where the service's log entries go: each becomes one JSON line of bounded length (logLine). */
export type LogWriter = (entry: Record<string, unknown>) => void;

/** A writer of timestamped, bounded lines into `sink` (SERVICE_LOG_MAX_LINE_BYTES). */
export function logWriter(sink: LogSink, maxLineBytes: number): LogWriter {
  return (entry) => sink(logLine({ time: new Date().toISOString(), ...entry }, maxLineBytes));
}

/** One line per request. Nothing secret goes in: no headers, no bodies, no query strings. */
export function requestLogEntry(record: RequestRecord, startedAt: bigint): Record<string, unknown> {
  const durationMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
  return { ...record, durationMs: Math.round(durationMs * 1000) / 1000 };
}

/** Strings keep at least this many characters when a line is shortened: enough to recognise them. */
const MIN_KEPT_CHARS = 16;

/**
 * The entry as one JSON line of at most `maxBytes` (UTF-8). What can make a line long is a string
 * a caller chose (a path, an id a host sent): when the line is too long, every string is cut to
 * the longest length that makes it fit, each cut one ending in how many characters it lost, so
 * that no caller can make one line, or the log, arbitrarily large.
 */
export function logLine(entry: Record<string, unknown>, maxBytes: number): string {
  const whole = JSON.stringify(entry);
  if (Buffer.byteLength(whole) <= maxBytes) return whole;
  const cutTo = (chars: number) =>
    JSON.stringify(entry, (_key, value: unknown) =>
      typeof value === "string" && value.length > chars ? `${value.slice(0, chars)}…(${value.length - chars} more)` : value,
    );
  let fits = MIN_KEPT_CHARS;
  let tooLong = Math.max(...Object.values(entry).map((value) => (typeof value === "string" ? value.length : 0)));
  while (tooLong - fits > 1) {
    const middle = Math.floor((fits + tooLong) / 2);
    if (Buffer.byteLength(cutTo(middle)) <= maxBytes) fits = middle;
    else tooLong = middle;
  }
  return cutTo(fits);
}
