import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { apiKeyInterceptor } from "./auth.ts";
import { declareHostStreaming } from "./hosts/index.ts";

export * from "./index.ts";

export interface WebTransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Default "connect". Browsers cannot speak plain gRPC. */
  protocol?: "connect" | "grpc-web";
}

/**
 * A transport for browsers (fetch based), authenticated with the API key. Browsers cannot
 * stream a request body, so host environments served through it use the server-streaming form.
 */
export function createWebTransport(options: WebTransportOptions): Transport {
  const common = { baseUrl: options.baseUrl, interceptors: [apiKeyInterceptor(options.apiKey)] };
  const transport = options.protocol === "grpc-web" ? createGrpcWebTransport(common) : createConnectTransport(common);
  return declareHostStreaming(transport, "server-streaming");
}
