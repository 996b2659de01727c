import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { apiKeyInterceptor } from "./auth.ts";

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

/** A transport for Node processes, authenticated with the API key. */
export function createNodeTransport(options: NodeTransportOptions): Transport {
  const common = { baseUrl: options.baseUrl, interceptors: [apiKeyInterceptor(options.apiKey)], useBinaryFormat: options.useBinaryFormat ?? true };
  switch (options.protocol ?? "connect") {
    case "grpc":
      return createGrpcTransport(common);
    case "grpc-web":
      return createGrpcWebTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" });
    case "connect":
      return createConnectTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" });
  }
}
