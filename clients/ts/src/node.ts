import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { apiKeyInterceptor } from "./auth.ts";
import { declareHostStreaming } from "./hosts/index.ts";

export * from "./index.ts";

export interface NodeTransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Wire protocol; default "connect". gRPC always uses HTTP/2. */
  protocol?: "connect" | "grpc" | "grpc-web";
  /** For connect and grpc-web; default "1.1". */
  httpVersion?: "1.1" | "2";
  /** Binary protobuf (default) or JSON for Connect and gRPC-Web. */
  useBinaryFormat?: boolean;
}

/**
 * A transport for Node processes, authenticated with the API key. Host environments served
 * through it use the bidirectional command stream when it speaks HTTP/2 (gRPC always does),
 * and the server-streaming form over HTTP/1.1, which cannot stream a request body.
 */
export function createNodeTransport(options: NodeTransportOptions): Transport {
  const protocol = options.protocol ?? "connect";
  const http2 = protocol === "grpc" || options.httpVersion === "2";
  return declareHostStreaming(transportFor(protocol, options), http2 ? "bidirectional" : "server-streaming");
}

function transportFor(protocol: NonNullable<NodeTransportOptions["protocol"]>, options: NodeTransportOptions): Transport {
  const common = { baseUrl: options.baseUrl, interceptors: [apiKeyInterceptor(options.apiKey)], useBinaryFormat: options.useBinaryFormat ?? true };
  switch (protocol) {
    case "grpc":
      return createGrpcTransport(common);
    case "grpc-web":
      return createGrpcWebTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" });
    case "connect":
      return createConnectTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" });
  }
}
