// The exporter wrapper that reports failed trace exports (server/src/tracing/reporting-exporter.ts):
// the first failure at once, then at most one report a minute with what was left out.
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";
import { EXPORT_FAILURE_REPORT_MS, ReportingExporter, type ExportFailureReport } from "../src/tracing/reporting-exporter.ts";

/** An exporter whose next results are scripted. */
function scripted(results: ExportResult[]): SpanExporter {
  return {
    export: (_spans, done) => done(results.shift() ?? { code: ExportResultCode.SUCCESS }),
    shutdown: () => Promise.resolve(),
  };
}

const spans = (n: number) => Array.from({ length: n }, () => ({}) as ReadableSpan);
const failed = (message: string): ExportResult => ({ code: ExportResultCode.FAILED, error: new Error(message) });

describe("ReportingExporter", () => {
  it("reports the first failure, counts the next ones for a minute, then reports again with them; successes say nothing", () => {
    let now = 0;
    const reports: ExportFailureReport[] = [];
    const results: ExportResult[] = [];
    const exporter = new ReportingExporter(
      scripted([failed("Unauthorized"), { code: ExportResultCode.SUCCESS }, failed("Unauthorized"), failed("ECONNREFUSED"), failed("Bad Gateway")]),
      (report) => reports.push(report),
      () => now,
    );
    const send = (n: number) => exporter.export(spans(n), (result) => results.push(result));
    send(3);
    send(1);
    now += 1_000;
    send(2);
    send(4);
    now += EXPORT_FAILURE_REPORT_MS;
    send(5);
    expect(reports).toEqual([
      { event: "trace.export_failed", spans: 3, error: "Unauthorized", suppressed: 0, suppressedSpans: 0 },
      { event: "trace.export_failed", spans: 5, error: "Bad Gateway", suppressed: 2, suppressedSpans: 6 },
    ]);
    // The batch processor is told every result as the exporter gave it.
    expect(results.map((result) => result.code)).toEqual([
      ExportResultCode.FAILED,
      ExportResultCode.SUCCESS,
      ExportResultCode.FAILED,
      ExportResultCode.FAILED,
      ExportResultCode.FAILED,
    ]);
  });
});
