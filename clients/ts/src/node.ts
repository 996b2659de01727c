import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { apiKeyInterceptor } from "./auth.ts";
import { declareHostStreaming, defineHostEnv, type HostEnvironmentDefinition, type HostEnvOptions } from "./hosts/index.ts";
import { isMcpEnvironmentName, MAX_MCP_ENVIRONMENT_NAME } from "./mcp/index.ts";
import { stdioMcpServer, type StdioMcpServerOptions } from "./mcp/stdio-server.ts";

export * from "./index.ts";
export type { StdioMcpServerOptions } from "./mcp/stdio-server.ts";

export interface NodeHostEnvOptions extends HostEnvOptions {
  /**
   * A local MCP server over stdio whose tools this host serves, instead of `tools`: the client
   * starts it when the session is created (or served), places each tool it lists as
   * `<name>__<tool>` (the MCP environments' rule, docs/mcp.md), answers each command with a
   * `tools/call`, and stops it when the host closes.
   */
  mcp?: StdioMcpServerOptions;
}

/**
 * Defines a host environment (see `hostEnv` of `@skillenv/client`); in Node it may serve a local
 * MCP server's tools over stdio (`mcp`). Performs no I/O.
 */
export function hostEnv(options: NodeHostEnvOptions): HostEnvironmentDefinition {
  const { mcp, ...rest } = options;
  if (mcp === undefined) return defineHostEnv(rest, undefined);
  if (!isMcpEnvironmentName(options.name))
    throw new TypeError(
      `host environment ${JSON.stringify(options.name)}: one serving an MCP server is named with at most ${MAX_MCP_ENVIRONMENT_NAME} characters and no "__" (it prefixes its tools' names)`,
    );
  return defineHostEnv(rest, stdioMcpServer(mcp));
}

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
