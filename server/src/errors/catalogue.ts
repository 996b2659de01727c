import { Code } from "@connectrpc/connect";

/** One entry of the catalogue: the Connect/gRPC code and the HTTP status of the JSON API. */
export interface ErrorSpec {
  readonly code: Code;
  readonly httpStatus: number;
  /** What the condition means, for docs/errors.md and for readers of this file. */
  readonly summary: string;
}

/**
 * Every stable error code the service returns. A code never changes meaning once published;
 * docs/errors.md is checked against this table by a test.
 */
export const errorCatalogue = {
  // Requests and authentication
  unauthenticated: { code: Code.Unauthenticated, httpStatus: 401, summary: "The Authorization bearer key is missing or not known." },
  invalid_argument: { code: Code.InvalidArgument, httpStatus: 400, summary: "A request field is missing or malformed; the message names the field." },
  malformed_request: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary:
      "The request body or query could not be decoded (bad JSON, unknown field, wrong type, invalid protobuf binary, a compressed message without its encoding, a content type the method does not take), or the HTTP/1.1 request itself does not parse.",
  },
  compression_unsupported: {
    code: Code.Unimplemented,
    httpStatus: 501,
    summary:
      "The request is compressed (Connect content-encoding, gRPC grpc-encoding), and this server accepts no compression: send it uncompressed. Unimplemented, as the gRPC and Connect protocols require for an encoding the server does not support.",
  },
  route_not_found: { code: Code.NotFound, httpStatus: 404, summary: "No API method is bound to this HTTP method and path." },
  payload_too_large: { code: Code.ResourceExhausted, httpStatus: 413, summary: "The request body exceeds the configured limit." },
  headers_too_large: {
    code: Code.ResourceExhausted,
    httpStatus: 431,
    summary:
      "The HTTP/1.1 request line and headers exceed Node's header size limit (16 KiB unless --max-http-header-size says otherwise); the connection is closed.",
  },
  unavailable: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary: "The server is starting or shutting down, or a dependency is unavailable; retry later or elsewhere.",
  },
  server_busy: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary:
      "The server already holds as many request bodies in memory as its budget allows (in all or on this connection); the request was not processed. Retry shortly.",
  },
  workspace_rate_limited: {
    code: Code.ResourceExhausted,
    httpStatus: 429,
    summary:
      "This workspace made more requests than its share of the server (SERVICE_WORKSPACE_REQUESTS_PER_SEC, with bursts of SERVICE_WORKSPACE_REQUEST_BURST; large responses count for more); the request was refused before its body was read and nothing ran. Retry after details.retryAfterSecs. Other workspaces are not affected.",
  },
  request_timeout: {
    code: Code.DeadlineExceeded,
    httpStatus: 408,
    summary:
      "The request body stalled (nothing arrived for SERVICE_BODY_IDLE_SECS), or HTTP/1.1 request headers did not arrive within SERVICE_HEADERS_TIMEOUT_SECS; the request was abandoned (its HTTP/1.1 connection closed, its HTTP/2 stream reset) and nothing was stored.",
  },
  canceled: {
    code: Code.Canceled,
    httpStatus: 499,
    summary: "The client went away (closed the connection or cancelled the call) before the answer; an unfinished upload stores nothing.",
  },
  internal: { code: Code.Internal, httpStatus: 500, summary: "An unexpected server fault; the message carries no internals." },

  // Assets and the signed upload
  invalid_sha256: { code: Code.InvalidArgument, httpStatus: 400, summary: "A content hash is not 64 lowercase hexadecimal characters." },
  invalid_size: { code: Code.InvalidArgument, httpStatus: 400, summary: "A declared size is negative or above the upload limit." },
  asset_not_found: { code: Code.NotFound, httpStatus: 404, summary: "This workspace has not uploaded (or finalized) content with that hash." },
  checksum_mismatch: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary:
      "Uploaded bytes do not hash to the signed SHA-256, or the checksum header differs from it. With uploads to S3, finalize finds it and removes the upload.",
  },
  size_mismatch: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "Uploaded bytes are not exactly the signed size; with uploads to S3, finalize found more than the upload limit and removed the upload.",
  },
  upload_url_expired: { code: Code.PermissionDenied, httpStatus: 403, summary: "The signed upload URL is past its expiry." },
  upload_url_invalid: {
    code: Code.PermissionDenied,
    httpStatus: 403,
    summary: "The upload URL's signature does not match its parameters (tampered or foreign).",
  },
  // Skills and their bundles
  invalid_skill_name: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: 'A skill name breaks ^[a-z0-9][a-z0-9_-]{0,127}$, contains "__", or is reserved (skills, skill).',
  },
  skill_not_found: { code: Code.NotFound, httpStatus: 404, summary: "This workspace has no skill of that name." },
  skill_version_not_found: {
    code: Code.NotFound,
    httpStatus: 404,
    summary: "The skill has no version of that number: never created, deleted, or dropped by retention (SERVICE_SKILL_MAX_VERSIONS).",
  },
  skill_version_current: {
    code: Code.FailedPrecondition,
    httpStatus: 409,
    summary: "The version to delete is the skill's current one; bind or roll back to another first, or delete the skill.",
  },
  bundle_not_zip: { code: Code.InvalidArgument, httpStatus: 400, summary: "The bundle is not a readable zip archive." },
  bundle_not_canonical: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "The zip is valid but not in canonical form (docs/bundle-format.md); re-zip it with a conforming client.",
  },
  bundle_missing_skill_md: { code: Code.InvalidArgument, httpStatus: 400, summary: "SKILL.md is not at the archive root." },
  frontmatter_missing: { code: Code.InvalidArgument, httpStatus: 400, summary: "SKILL.md does not start with a YAML frontmatter block." },
  frontmatter_invalid: { code: Code.InvalidArgument, httpStatus: 400, summary: "The frontmatter is not valid YAML mapping, or a field has the wrong type." },
  frontmatter_too_large: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "The frontmatter exceeds a bound of the format: its size, its keys, its nesting depth or its aliases (docs/bundle-format.md section 3).",
  },
  description_missing: { code: Code.InvalidArgument, httpStatus: 400, summary: "The frontmatter has no non-empty description." },
  description_too_long: { code: Code.InvalidArgument, httpStatus: 400, summary: "The description exceeds 2048 characters." },
  bundle_path_invalid: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "An entry path is absolute, has an empty, . or .. segment, a backslash, a NUL or other control character, or is not UTF-8.",
  },
  bundle_duplicate_entry: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "Two entries have the same path, or a path is both a file and a directory prefix.",
  },
  bundle_special_entry: { code: Code.InvalidArgument, httpStatus: 400, summary: "An entry is a symlink, device or other non-regular file." },
  bundle_encrypted: { code: Code.InvalidArgument, httpStatus: 400, summary: "An entry is encrypted." },
  bundle_too_many_entries: { code: Code.InvalidArgument, httpStatus: 400, summary: "The bundle has more entries than the configured limit." },
  bundle_entry_too_large: { code: Code.InvalidArgument, httpStatus: 400, summary: "One entry's uncompressed size exceeds the configured limit." },
  bundle_too_large: { code: Code.InvalidArgument, httpStatus: 400, summary: "The bundle's total uncompressed size exceeds the configured limit." },
  bundle_compression_ratio: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "An entry's compression ratio is above the configured limit (zip bomb guard).",
  },
  // Artifacts, preparation and the service environment
  not_found: { code: Code.NotFound, httpStatus: 404, summary: "This workspace has not admitted an artifact with that id (or it does not exist)." },
  invalid_component: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "The bytes are not a WebAssembly component, or it exports no supported world (tool: run; agent-loop: turn).",
  },
  import_not_grantable: { code: Code.InvalidArgument, httpStatus: 400, summary: "The component imports an interface that no grant can satisfy." },
  component_too_large: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "The component exceeds the configured size limit (or the inline limit of a gRPC admission).",
  },
  source_too_large: { code: Code.InvalidArgument, httpStatus: 400, summary: "The program source exceeds the configured size limit." },
  source_not_utf8: { code: Code.InvalidArgument, httpStatus: 400, summary: "The program source is not valid UTF-8." },
  grant_not_allowed: {
    code: Code.PermissionDenied,
    httpStatus: 403,
    summary: "A grant lies outside the deployment's allow-list (filesystem, network or secrets).",
  },
  invalid_grant: { code: Code.InvalidArgument, httpStatus: 400, summary: "A grant is malformed (unknown access mode, origin syntax, secret name)." },
  preparation_failed: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary: "Preparing an artifact (transpile, instrument, compile, load on workers) failed; the message names the artifact and the cause.",
  },
  sandbox_unavailable: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary:
      "The service environment is not running on this server: its workers' sandbox (bubblewrap) could not start. The operator installs bubblewrap or sets SERVICE_ENV_SANDBOX=off (docs/operations.md); nothing was stored or sent.",
  },
  pool_saturated: {
    code: Code.ResourceExhausted,
    httpStatus: 429,
    summary: "Every execution slot of the worker pool is busy; the call was not started. Retry later.",
  },
  fuel_exhausted: { code: Code.ResourceExhausted, httpStatus: 422, summary: "The invocation used up its fuel (guest computation budget) and was stopped." },
  memory_exhausted: { code: Code.ResourceExhausted, httpStatus: 422, summary: "The guest tried to grow its memory beyond the configured cap and was stopped." },
  timeout: { code: Code.DeadlineExceeded, httpStatus: 504, summary: "The invocation passed its deadline (or SERVICE_MAX_TURN_SECS) and was stopped." },
  credential_unavailable: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary:
      "A receipt: an extension or MCP environment's sealed credential cannot be read (the sealing-key was lost or replaced, or the stored value altered); nothing was sent.",
  },
  secret_unavailable: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary: "A granted secret is not set in the server's process environment; the invocation did not start.",
  },
  guest_trap: {
    code: Code.Aborted,
    httpStatus: 422,
    summary: "The guest trapped (e.g. unreachable, out-of-bounds access) for a reason other than fuel or memory.",
  },
  // Sessions, environments and the journal
  session_not_found: { code: Code.NotFound, httpStatus: 404, summary: "This workspace has no session with that id." },
  session_moved: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary:
      "Another replica took the session over while this one served the call (its lease had expired); what this replica had not journaled was not done. Retry the call: it reaches the session's owner.",
  },
  session_ended: { code: Code.FailedPrecondition, httpStatus: 409, summary: "The session has ended (or is being deleted) and takes no new work." },
  tool_not_found: { code: Code.NotFound, httpStatus: 404, summary: "The session has no tool placed under that name." },
  environment_not_found: { code: Code.NotFound, httpStatus: 404, summary: "The session has no environment of that name." },
  environment_not_ready: {
    code: Code.FailedPrecondition,
    httpStatus: 409,
    summary: "The tool's environment is not set up (manual and not yet set up, or its setup failed); nothing was sent.",
  },
  field_too_large: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary:
      "A field the service would store is above its limit: a tool's inputSchema, configuration or implementation, an environment's options, a run's model name or parameters or agent loop configuration (SERVICE_MAX_FIELD_BYTES as JSON text), a run's message or agentsMd (SERVICE_JOURNAL_MAX_PAYLOAD_BYTES), a tool's description (4096 characters), or a session's environments and tools together (SERVICE_SESSION_MAX_BYTES). details.field names it (e.g. tools[3].inputSchema), with its size and the limit (sizeBytes and maxBytes, or sizeChars and maxChars); nothing was created.",
  },
  input_too_large: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "A tool input exceeds SERVICE_JOURNAL_MAX_PAYLOAD_BYTES as JSON text; nothing was journaled or sent.",
  },
  output_too_large: {
    code: Code.ResourceExhausted,
    httpStatus: 422,
    summary: "A tool returned more than SERVICE_JOURNAL_MAX_PAYLOAD_BYTES; its output is not kept (the tool did run).",
  },
  input_too_deep: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "A tool input nests arrays and objects deeper than SERVICE_JOURNAL_MAX_JSON_DEPTH; nothing was journaled or sent.",
  },
  output_too_deep: {
    code: Code.ResourceExhausted,
    httpStatus: 422,
    summary: "A receipt: the tool returned JSON nested deeper than SERVICE_JOURNAL_MAX_JSON_DEPTH; its output is not kept (the tool did run).",
  },
  storage_unavailable: { code: Code.Unavailable, httpStatus: 503, summary: "The metadata store failed to read or write; nothing was acknowledged." },
  write_conflict: {
    code: Code.Aborted,
    httpStatus: 409,
    summary: "Other writers kept changing the record this call updates (through this replica or others); nothing was written. Retry.",
  },
  host_unavailable: { code: Code.Unavailable, httpStatus: 503, summary: "A receipt: no host is connected for the tool's host environment; nothing was sent." },
  host_busy: {
    code: Code.ResourceExhausted,
    httpStatus: 429,
    summary: "A receipt: the host has its maximum of commands in flight, or does not read its stream; nothing was sent.",
  },
  extension_unavailable: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary:
      "A receipt: the extension could not be reached (nothing was sent) or said it is unavailable. Other refusals by an extension are extension_<connect code>, e.g. extension_unauthenticated.",
  },
  mcp_url_not_allowed: {
    code: Code.PermissionDenied,
    httpStatus: 403,
    summary: "An MCP environment's url is not an http(s) URL whose origin lies within SERVICE_MCP_ALLOW (empty by default); nothing was created.",
  },
  mcp_unavailable: {
    code: Code.Unavailable,
    httpStatus: 503,
    summary:
      "A receipt: the MCP server could not be reached (connection refused, name not resolved) or could not be initialized for this call; the tool call was not sent. Retry later.",
  },
  mcp_error: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary:
      "A receipt: the MCP server refused the request with a JSON-RPC error (details.mcpCode), or its HTTP endpoint refused it (details.httpStatus, e.g. 401 for a wrong credential, 404 for an expired MCP session); the server did not run the tool.",
  },
  mcp_tool_error: {
    code: Code.Aborted,
    httpStatus: 422,
    summary: "A receipt: the MCP tool ran and reported an error (its result had isError: true); the message carries the tool's content.",
  },
  mcp_tool_not_offered: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary: "A setup receipt: the MCP environment's tools option names a tool the server does not list; the environment failed and places nothing.",
  },
  mcp_tool_names_collide: {
    code: Code.FailedPrecondition,
    httpStatus: 422,
    summary:
      "A setup receipt: two of the MCP server's tools would get the same placement name (the server lists a name twice, or a shortened name equals another tool's); the environment failed and places nothing.",
  },
  mcp_method_not_allowed: {
    code: Code.Unimplemented,
    httpStatus: 405,
    summary:
      "The service's MCP endpoints take POST only (Allow: POST): they are stateless, so they offer no stream of server-initiated messages (GET) and no MCP session to end (DELETE).",
  },
  mcp_not_acceptable: {
    code: Code.InvalidArgument,
    httpStatus: 406,
    summary: "A POST to an MCP endpoint must accept both application/json and text/event-stream (its Accept header), as Streamable HTTP requires.",
  },
  mcp_protocol_version_unsupported: {
    code: Code.InvalidArgument,
    httpStatus: 400,
    summary: "A request to an MCP endpoint names, in its MCP-Protocol-Version header, a protocol version the service does not speak as a server (docs/mcp.md).",
  },
  host_connection_not_found: { code: Code.NotFound, httpStatus: 404, summary: "Report names no open host connection of this workspace; open Commands again." },
  operation_not_found: {
    code: Code.NotFound,
    httpStatus: 404,
    summary: "A host receipt names no command in flight on its connection (unknown, foreign or already finished); it was refused and logged.",
  },
  // Runs
  run_not_found: { code: Code.NotFound, httpStatus: 404, summary: "The session has no run with that id." },
  run_in_progress: {
    code: Code.FailedPrecondition,
    httpStatus: 409,
    summary: "The session is running a run (one runs at a time), or the run to delete is still running; wait for it or cancel it.",
  },
  idempotency_key_reused: {
    code: Code.AlreadyExists,
    httpStatus: 409,
    summary: "The idempotency key was used for a run of this session with a different submission.",
  },
  provider_key_missing: { code: Code.InvalidArgument, httpStatus: 400, summary: "provider_keys has no key for the model's provider." },
  approval_not_found: { code: Code.NotFound, httpStatus: 404, summary: "The run has no approval with that id." },
  approval_decided: {
    code: Code.FailedPrecondition,
    httpStatus: 409,
    summary: "The approval was decided already (approved or denied, once); this decision changed nothing. The message says which it was.",
  },
  approval_expired: {
    code: Code.FailedPrecondition,
    httpStatus: 409,
    summary: "The approval's run ended (its turn timed out, was cancelled or failed) before anyone decided; the tool was not called.",
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorCatalogue;

/** The domain carried in google.rpc.ErrorInfo next to the code. */
export const ERROR_DOMAIN = "skillenv";

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorCatalogue, value);
}
