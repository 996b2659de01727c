import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from "@opentelemetry/sdk-trace";
import type { TracingSettings } from "../config/index.ts";
import { ReportingExporter, type ExportFailureReport } from "./reporting-exporter.ts";

/** Tracing as installed in this process; `shutdown` exports what is queued and uninstalls it. */
export interface Tracing {
  shutdown(): Promise<void>;
}

/**
 * Installs the OpenTelemetry SDK for this process: the tracer provider every span of the service
 * is made by (spans.ts asks the API for it), the AsyncLocalStorage context manager that carries
 * the current span across awaits, and the W3C trace context propagator (`traceparent` in and
 * out). Spans are batched and POSTed as OTLP/protobuf to `settings.url`; failed exports are
 * told to `reportFailure`, bounded.
 *
 * The API's globals are the process's: one traced service per process (serve.ts starts one).
 * Without this call nothing is installed and every span the service starts is the API's no-op.
 */
export function startTracing(settings: TracingSettings, reportFailure: (failure: ExportFailureReport) => void = () => {}): Tracing {
  const otlp = new OTLPTraceExporter({ url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs });
  // A batch whose export failed is dropped; the service log says so (reporting-exporter.ts).
  const exporter = new ReportingExporter(otlp, reportFailure);
  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(settings.resource)),
    sampler: samplerOf(settings.sampler),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...settings.batch })],
  });
  // Registered one by one, and a failure undoes only what this call registered.
  const contextManager = new AsyncLocalStorageContextManager().enable();
  if (!context.setGlobalContextManager(contextManager)) {
    contextManager.disable();
    void provider.shutdown();
    throw new Error("tracing is already installed in this process: one traced service per process");
  }
  if (!trace.setGlobalTracerProvider(provider)) {
    context.disable();
    void provider.shutdown();
    throw new Error("tracing is already installed in this process: one traced service per process");
  }
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return {
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

/** The specification's samplers by their OTEL_TRACES_SAMPLER names. */
function samplerOf({ name, ratio }: TracingSettings["sampler"]): Sampler {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}
