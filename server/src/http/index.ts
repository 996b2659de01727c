export { recordingGate } from "./call-record.ts";
export { BodyBudget } from "./body-budget.ts";
export { listen, type Listener, type ListenOptions } from "./listener.ts";
export { LIVENESS_PATH, READINESS_PATH, startingListener } from "./probes.ts";
export type { NodeRequest, NodeResponse } from "./node-types.ts";
export type { ProtocolEndpoint, ProtocolExchange } from "./protocol-endpoint.ts";
export { RequestBody, type ReadLimits } from "./request-body.ts";
export {
  createRequestListener,
  type RawEndpoint,
  type RawEndpointResult,
  type RequestHandlerOptions,
  type RequestListener,
} from "./request-handler.ts";
export { logLine, logWriter, type LogSink, type LogWriter, type RequestRecord } from "./request-log.ts";
