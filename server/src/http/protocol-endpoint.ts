import type { NodeRequest, NodeResponse } from "./node-types.ts";
import type { RequestRecord } from "./request-log.ts";

/**
 * An endpoint that speaks a protocol of its own over HTTP (the MCP endpoint): it authenticates,
 * reads the body and writes the response itself. What it throws before the response has started
 * leaves as the API's JSON error, with its stable code, like every other refusal.
 */
export interface ProtocolEndpoint {
  /** Its name in the request log. */
  readonly protocol: RequestRecord["protocol"];
  matches(pathname: string): boolean;
  serve(exchange: ProtocolExchange): Promise<void>;
}

export interface ProtocolExchange {
  req: NodeRequest;
  res: NodeResponse;
  url: URL;
  /** The body, read under the listener's idle timeout and in-memory budget. */
  body: AsyncIterable<Uint8Array>;
  /** The request's log record: the endpoint sets `workspace` once it knows it. */
  record: RequestRecord;
  /** To call before the response head is written (RequestBody.prepareResponse). */
  prepareResponse(): void;
  /** Settles when the response has closed (sent, or the client gone). */
  closed: Promise<void>;
}
