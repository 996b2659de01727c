import { keepCredential } from "./credentials.ts";
import type { SetupMode } from "./environments.ts";

export interface McpEnvOptions {
  /** The environment's name in a session: at most 32 characters of [A-Za-z0-9_-], without "__"; it prefixes its tools' names. */
  name: string;
  /** The server's MCP endpoint (Streamable HTTP), e.g. "https://mcp.example.com/mcp"; the service's SERVICE_MCP_ALLOW must include its origin. */
  url: string;
  /** A bearer credential the service sends the server; sealed by the service, never journaled or shown. */
  credential?: string;
  /** The server's own names of the tools to expose; by default every tool it lists. */
  tools?: readonly string[];
  /** `"always"`: a run's every call of the server's tools waits for a person's decision (docs/runs.md, "Approvals"); default `"never"`. */
  approval?: "always" | "never";
  /** Default "automatic". */
  setup?: SetupMode;
}

/**
 * An MCP server reached over Streamable HTTP. Its tools are placed when the session sets it up,
 * each as `<name>__<tool>` (see the session's tools); none is placed by hand. The credential is
 * not among its fields, so printing or serialising the definition never shows it.
 */
export interface McpEnvironmentDefinition {
  readonly kind: "mcp";
  readonly name: string;
  readonly setup: SetupMode;
  readonly url: string;
  readonly tools: readonly string[];
  readonly approval: "always" | "never";
  readonly hasCredential: boolean;
}

/** Defines an MCP environment. Performs no I/O: the server checks the URL against its allow-list when a session binds it. */
export function mcpEnv(options: McpEnvOptions): McpEnvironmentDefinition {
  const what = `MCP environment ${JSON.stringify(options.name)}`;
  if (typeof options.url !== "string" || !URL.canParse(options.url) || !/^https?:$/.test(new URL(options.url).protocol))
    throw new TypeError(`${what}: the url must be an http(s) URL, not ${JSON.stringify(options.url)}`);
  const { credential } = options;
  if (credential !== undefined && (typeof credential !== "string" || credential === ""))
    throw new TypeError(`${what}: the credential must be a non-empty string or undefined`);
  const tools = [...(options.tools ?? [])];
  if (tools.some((tool) => typeof tool !== "string" || tool === "")) throw new TypeError(`${what}: tools are the server's tool names (non-empty strings)`);
  const approval = options.approval ?? "never";
  if (approval !== "always" && approval !== "never") throw new TypeError(`${what}: approval must be "always" or "never", not ${JSON.stringify(approval)}`);
  const definition: McpEnvironmentDefinition = Object.freeze({
    kind: "mcp",
    name: options.name,
    setup: options.setup ?? "automatic",
    url: options.url,
    tools: Object.freeze(tools),
    approval,
    hasCredential: credential !== undefined,
  });
  if (credential !== undefined) keepCredential(definition, credential);
  return definition;
}
