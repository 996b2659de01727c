export { startTracing, type Tracing } from "./provider.ts";
export {
  bindToCurrentContext,
  inSpan,
  markFailed,
  runWithin,
  serverAttributes,
  SpanKind,
  startClientSpan,
  startServerSpan,
  traceHeaders,
  type Attributes,
  type Context,
  type Span,
} from "./spans.ts";
