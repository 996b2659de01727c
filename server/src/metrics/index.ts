export { Metrics, serveMetrics } from "./metrics.ts";
