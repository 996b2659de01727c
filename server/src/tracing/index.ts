export { startTracing, type Tracing } from "./provider.ts";
export {
  bindToCurrentContext,
  inSpan,
  markFailed,
  runWithin,
  SpanKind,
  startClientSpan,
  startServerSpan,
  traceHeaders,
  type Attributes,
  type Context,
  type Span,
} from "./spans.ts";
