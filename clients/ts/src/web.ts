import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { apiKeyInterceptor } from "./auth.ts";

export * from "./index.ts";

export interface WebTransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Default "connect". Browsers cannot speak plain gRPC. */
  protocol?: "connect" | "grpc-web";
}

/** A transport for browsers (fetch based), authenticated with the API key. */
export function createWebTransport(options: WebTransportOptions): Transport {
  const common = { baseUrl: options.baseUrl, interceptors: [apiKeyInterceptor(options.apiKey)] };
  return options.protocol === "grpc-web" ? createGrpcWebTransport(common) : createConnectTransport(common);
}
