import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { JSONRPCMessageSchema, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import type { WorkspaceRateLimiter } from "../auth/index.ts";
import { serviceError } from "../errors/index.ts";
import type { ProtocolEndpoint, ProtocolExchange } from "../http/index.ts";
import { FORWARDED_HEADER, type SessionOwnership } from "../replicas/index.ts";
import type { Sessions } from "../sessions/index.ts";
import type { SkillRegistry } from "../skills/index.ts";
import { CallsInFlight } from "./calls-in-flight.ts";
import { MCP_UNREAD_PROCEDURE, mcpProcedure } from "./method-label.ts";
import { sessionToolsServer } from "./session-tools-server.ts";
import { SkillEntries } from "./skill-entries.ts";
import { skillsServer } from "./skills-server.ts";

/** The workspace's skills (the skills extension). */
export const MCP_PATH = "/mcp";
/** A session's tools: /mcp/sessions/<session id>. */
export const MCP_SESSIONS_PREFIX = "/mcp/sessions/";

export interface McpEndpointOptions {
  /** The workspace of an Authorization header, or the unauthenticated refusal (auth's bearerAuthenticator). */
  authenticate(header: string | undefined): string;
  /**
   * Each workspace's share of the server's requests, taken before the body is read: a request
   * past it is refused `workspace_rate_limited`, the refusal held first as the request gate holds
   * it (WorkspaceRateLimiter.admitOrHold). None: no limit.
   */
  workspaceRates?: WorkspaceRateLimiter;
  registry: SkillRegistry;
  sessions: Sessions;
  /** Which replica serves each session: a session's endpoint is answered by its owner. */
  ownership: SessionOwnership;
  /** SERVICE_MAX_REQUEST_BYTES: the largest JSON-RPC body read, as for every API route. */
  maxBodyBytes: number;
}

/**
 * The service as an MCP server over Streamable HTTP (MCP 2025-11-25), stateless: every POST
 * carries one JSON-RPC message and gets its answer (one JSON body, or a tool call's progress and
 * result as server-sent events) from a server made for that request, so nothing of a client is held between requests and any replica (a session's, forwarded to its owner)
 * can answer any request. Authenticated exactly as the API is (`Authorization: Bearer <key>`,
 * refused before the body is read); a session of another workspace is session_not_found, as an
 * unknown id is. What the endpoint refuses before MCP is involved leaves as the API's JSON error.
 */
export function createMcpEndpoint(options: McpEndpointOptions): ProtocolEndpoint {
  const entries = new SkillEntries(options.registry);
  const calls = new CallsInFlight();
  return {
    protocol: "mcp",
    matches: (pathname) => pathname === MCP_PATH || pathname.startsWith(MCP_SESSIONS_PREFIX),
    async serve(exchange) {
      const { req, res, url, record } = exchange;
      record.procedure = MCP_UNREAD_PROCEDURE;
      const workspace = options.authenticate(req.headers.authorization);
      record.workspace = workspace;
      const clientLeft = new AbortController();
      // Settles when the response has closed: sent (the request is over by then) or the client gone.
      void exchange.closed.then(() => clientLeft.abort("the MCP client closed its response stream"));
      await options.workspaceRates?.admitOrHold(workspace, clientLeft.signal);
      const sessionId = url.pathname === MCP_PATH ? undefined : url.pathname.slice(MCP_SESSIONS_PREFIX.length);
      if (sessionId !== undefined) {
        if (sessionId === "" || sessionId.includes("/")) throw serviceError("route_not_found", `no MCP endpoint is bound to ${url.pathname}`);
        const route = await options.ownership.route(sessionId);
        if (!route.here) return forward(exchange, route.address, options, clientLeft.signal);
        // Throws session_not_found for another workspace's session as for an unknown id.
        await options.sessions.get(workspace, sessionId);
      }
      if (req.method !== "POST") {
        res.setHeader("allow", "POST");
        throw serviceError(
          "mcp_method_not_allowed",
          `the MCP endpoint takes POST only, not ${req.method}: it is stateless, with no stream to GET and no MCP session to DELETE`,
        );
      }
      checkHeaders(req.headers);
      const message = jsonRpcMessage(await readBody(exchange.body, req.headers["content-length"], options.maxBodyBytes));
      record.procedure = mcpProcedure(message);
      // A tool call's progress streams (server-sent events); everything else is one JSON body.
      if (sessionId === undefined) await answer(skillsServer({ workspace, registry: options.registry, entries }), exchange, message, "json");
      else
        await answer(
          sessionToolsServer({ workspace, sessionId, sessions: options.sessions, calls, clientLeft: clientLeft.signal }),
          exchange,
          message,
          "stream",
        );
    },
  };
}

const FORWARDED_HEADERS = ["accept", "content-type", "mcp-protocol-version"] as const;

/**
 * A session's endpoint reached a replica that does not own the session: the request is made
 * again to the owner (docs/operations.md, "Scaling"), with the caller's key, and its answer
 * (JSON, or server-sent events) relayed as it comes. The owner checks everything again.
 */
async function forward(exchange: ProtocolExchange, address: string, options: McpEndpointOptions, clientLeft: AbortSignal): Promise<void> {
  const { req, res, url, prepareResponse } = exchange;
  if (req.headers[FORWARDED_HEADER] !== undefined)
    throw serviceError("session_moved", "the session changed replicas while the request was forwarded; retry it");
  const headers = new Headers({ [FORWARDED_HEADER]: options.ownership.replica });
  for (const name of [...FORWARDED_HEADERS, "authorization"]) {
    const value = req.headers[name];
    if (typeof value === "string") headers.set(name, value);
  }
  const body = req.method === "POST" ? await readBody(exchange.body, req.headers["content-length"], options.maxBodyBytes) : undefined;
  let response: Response;
  try {
    response = await fetch(new URL(url.pathname + url.search, address), {
      method: req.method ?? "POST",
      headers,
      body: body && Buffer.from(body),
      signal: clientLeft,
    });
  } catch {
    throw serviceError("unavailable", "the replica that serves this session could not be reached; retry the request");
  }
  prepareResponse();
  res.statusCode = response.status;
  response.headers.forEach((value, name) => {
    if (name !== "content-length" && name !== "connection" && name !== "keep-alive" && name !== "transfer-encoding") res.setHeader(name, value);
  });
  if (response.body) {
    const sink = res as { write(chunk: Uint8Array): boolean };
    const reader = response.body.getReader();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) sink.write(next.value);
    } catch {
      // The owner's stream broke: the client sees the stream end early.
    }
  }
  res.end();
}

/**
 * One JSON-RPC exchange through the SDK's transport, its Response written to the Node response
 * as it comes: one JSON body, or a stream of server-sent events (notifications, then the answer).
 * A client that leaves stops the writing; a tool call it leaves is cancelled (sessionToolsServer)
 * and still ends by its receipt.
 */
async function answer(server: Server, exchange: ProtocolExchange, message: unknown, form: "json" | "stream"): Promise<void> {
  const { req, res, url, prepareResponse, closed } = exchange;
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: form === "json" });
  try {
    await server.connect(transport);
    // Only what the transport reads: the key stays out of the SDK's request info, where handlers see headers.
    const headers = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") headers.set(name, value);
    }
    const response = await transport.handleRequest(new Request(url, { method: "POST", headers }), { parsedBody: message });
    prepareResponse();
    res.statusCode = response.status;
    response.headers.forEach((value, name) => res.setHeader(name, value));
    if (response.body) {
      const reader = response.body.getReader();
      void closed.then(() => reader.cancel().catch(() => undefined));
      // Both Node responses (HTTP/1.1 and HTTP/2) write a chunk alike; their union's overloads do not type-check.
      const sink = res as { write(chunk: Uint8Array): boolean };
      for (let next = await reader.read(); !next.done; next = await reader.read()) sink.write(next.value);
    }
    res.end();
  } finally {
    await server.close();
  }
}

/** Streamable HTTP's own header rules, checked here (before the SDK would) so that a refusal has a stable code. */
function checkHeaders(headers: ProtocolExchange["req"]["headers"]): void {
  const version = headers["mcp-protocol-version"];
  if (version !== undefined && (Array.isArray(version) || !SUPPORTED_PROTOCOL_VERSIONS.includes(version))) {
    throw serviceError(
      "mcp_protocol_version_unsupported",
      `MCP-Protocol-Version ${JSON.stringify(version)} is not one this server speaks: ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}`,
    );
  }
  const accept = headers.accept ?? "";
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
    throw serviceError("mcp_not_acceptable", "a POST to the MCP endpoint must accept both application/json and text/event-stream");
  }
  const contentType = headers["content-type"] ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw serviceError("malformed_request", `the MCP endpoint takes JSON-RPC as application/json, not ${JSON.stringify(contentType)}`);
  }
}

/** The whole body, up to maxBytes: a larger declared length is refused before a byte is read. */
async function readBody(body: AsyncIterable<Uint8Array>, declared: string | undefined, maxBytes: number): Promise<Uint8Array> {
  const tooLarge = () => serviceError("payload_too_large", `the request body exceeds ${maxBytes} bytes`);
  if (Number(declared) > maxBytes) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * One JSON-RPC message. A batch (an array) is refused: MCP has had none since 2025-06-18, and one
 * message per request bounds what a request can make the server do.
 */
function jsonRpcMessage(bytes: Uint8Array): unknown {
  let message: unknown;
  try {
    message = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw serviceError("malformed_request", "the MCP request body is not JSON");
  }
  if (Array.isArray(message)) throw serviceError("malformed_request", "the MCP endpoint takes one JSON-RPC message per request, not a batch");
  if (!JSONRPCMessageSchema.safeParse(message).success) throw serviceError("malformed_request", "the MCP request body is not a JSON-RPC 2.0 message");
  return message;
}
