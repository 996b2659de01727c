import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

/** How often a failing exporter is reported: the first failure at once, then one line a minute. */
export const EXPORT_FAILURE_REPORT_MS = 60_000;

/** A report of failed exports: what the service log says (never the exporter's headers). */
export interface ExportFailureReport {
  event: "trace.export_failed";
  /** Spans dropped by this failure. */
  spans: number;
  /** The exporter's words, as it said them (a status, a connection error). */
  error: string;
  /** Failures since the last report that were not reported, and the spans they dropped. */
  suppressed: number;
  suppressedSpans: number;
}

/**
 * An exporter that says when exports fail. The SDK's batch processor drops a batch whose export
 * failed and tells only OpenTelemetry's diagnostic logger, which the service does not install: a
 * collector that is down, refuses the credentials or is misaddressed would otherwise go unseen.
 * Reports are bounded as the host refusals' are: the first failure, then at most one a minute
 * with how many were left out.
 */
export class ReportingExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #report: (failure: ExportFailureReport) => void;
  readonly #now: () => number;
  #lastReport = Number.NEGATIVE_INFINITY;
  #suppressed = 0;
  #suppressedSpans = 0;

  constructor(inner: SpanExporter, report: (failure: ExportFailureReport) => void, now: () => number = Date.now) {
    this.#inner = inner;
    this.#report = report;
    this.#now = now;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.#failed(spans.length, result.error);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }

  #failed(spans: number, error: Error | undefined): void {
    const now = this.#now();
    if (now - this.#lastReport < EXPORT_FAILURE_REPORT_MS) {
      this.#suppressed++;
      this.#suppressedSpans += spans;
      return;
    }
    this.#lastReport = now;
    const report: ExportFailureReport = {
      event: "trace.export_failed",
      spans,
      error: error?.message ?? "the export failed",
      suppressed: this.#suppressed,
      suppressedSpans: this.#suppressedSpans,
    };
    this.#suppressed = 0;
    this.#suppressedSpans = 0;
    try {
      this.#report(report);
    } catch {
      // A report is best effort: the spans are lost either way.
    }
  }
}
