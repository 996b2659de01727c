import * as http from "node:http";
import { buffer } from "node:stream/consumers";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ExportTraceServiceRequestSchema, ExportTraceServiceResponseSchema } from "../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import type { AnyValue, KeyValue } from "../gen/opentelemetry/proto/common/v1/common_pb.js";
import type { Span_SpanKind, Status_StatusCode } from "../gen/opentelemetry/proto/trace/v1/trace_pb.js";

/** A span as the receiver decoded it: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  name: string;
  kind: Span_SpanKind;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  attributes: Record<string, unknown>;
  status: Status_StatusCode;
  /** The attributes of the resource (service.name, telemetry.sdk.*) that sent it. */
  resource: Record<string, unknown>;
}

/**
 * An OTLP/HTTP collector on loopback, as much of one as the tests need: `POST /v1/traces` with an
 * `application/x-protobuf` body, decoded with the OpenTelemetry protos (server/test/third_party,
 * generated into server/test/gen), answered with an empty ExportTraceServiceResponse.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests received, whatever they held. */
  requests = 0;
  /** The content types they came with. */
  readonly contentTypes: string[] = [];
  url = "";
  #server: http.Server | undefined;
  readonly #waiters = new Set<() => void>();

  async start(): Promise<this> {
    this.#server = http.createServer((req, res) => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      buffer(req).then(
        (body) => {
          this.requests++;
          this.contentTypes.push(req.headers["content-type"] ?? "");
          this.#receive(fromBinary(ExportTraceServiceRequestSchema, body));
          res
            .writeHead(200, { "content-type": "application/x-protobuf" })
            .end(toBinary(ExportTraceServiceResponseSchema, create(ExportTraceServiceResponseSchema)));
        },
        () => res.destroy(),
      );
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, "127.0.0.1", () => resolve()));
    this.url = `http://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
    return this;
  }

  /** Resolves once the spans received (so far or later) satisfy `condition`. */
  until(condition: (spans: readonly ReceivedSpan[]) => boolean): Promise<readonly ReceivedSpan[]> {
    return new Promise((resolve) => {
      const check = () => {
        if (!condition(this.spans)) return false;
        this.#waiters.delete(check);
        resolve(this.spans);
        return true;
      };
      if (!check()) this.#waiters.add(check);
    });
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }

  #receive(request: ReturnType<typeof fromBinary<typeof ExportTraceServiceRequestSchema>>): void {
    for (const resourceSpans of request.resourceSpans) {
      const resource = attributesOf(resourceSpans.resource?.attributes ?? []);
      for (const scopeSpans of resourceSpans.scopeSpans) {
        for (const span of scopeSpans.spans) {
          this.spans.push({
            name: span.name,
            kind: span.kind,
            traceId: hex(span.traceId),
            spanId: hex(span.spanId),
            parentSpanId: hex(span.parentSpanId),
            attributes: attributesOf(span.attributes),
            status: span.status?.code ?? 0,
            resource,
          });
        }
      }
    }
    for (const waiter of [...this.#waiters]) waiter();
  }
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

function attributesOf(keyValues: readonly KeyValue[]): Record<string, unknown> {
  return Object.fromEntries(keyValues.map(({ key, value }) => [key, plainValue(value)]));
}

function plainValue(value: AnyValue | undefined): unknown {
  const kind = value?.value;
  if (kind === undefined) return undefined;
  switch (kind.case) {
    case undefined:
      return undefined;
    case "arrayValue":
      return kind.value.values.map(plainValue);
    case "kvlistValue":
      return attributesOf(kind.value.values);
    case "intValue":
      return Number(kind.value);
    case "bytesValue":
      return hex(kind.value);
    default:
      return kind.value;
  }
}
