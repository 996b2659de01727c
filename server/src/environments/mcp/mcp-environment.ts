import { originAllowed } from "../../config/index.ts";
import { serviceError } from "../../errors/index.ts";
import { readableCredential, unsealCredential, type Sealer } from "../extension/sealer.ts";
import type { BindingContext, DiscoveredTool, EnvironmentKind } from "../kinds.ts";
import type { EnvironmentBinding } from "../port.ts";
import { redactingBinding } from "../redacting-binding.ts";
import { McpBinding, type McpSetupOutput } from "./mcp-binding.ts";
import { McpConnection } from "./mcp-connection.ts";
import { isMcpEnvironmentName, MAX_MCP_ENVIRONMENT_NAME } from "@skillenv/client/mcp";

/** An MCP binding as a session stores it: the credential only sealed. */
export interface McpOptions {
  url: string;
  sealedCredential?: string;
  /** The server's names of the tools to expose; empty: all. */
  tools: string[];
  /** "always": every exposed tool's calls by a run wait for a person's decision; absent: never. */
  approval?: "always";
}

export interface McpKindOptions {
  sealer: Sealer;
  /** SERVICE_MCP_ALLOW: an MCP server's URL must be within it. */
  mcpAllow: readonly string[];
}

/**
 * MCP environments: a Model Context Protocol server reached over Streamable HTTP, the service
 * its client. Setup lists the server's tools, which become the session's placements
 * (`<environment>__<tool>`, tool-names.ts); the optional credential is sealed at rest and sent
 * only as a bearer token to the server, and cut out of whatever the server answers.
 */
export class McpEnvironmentKind implements EnvironmentKind<McpOptions> {
  readonly #options: McpKindOptions;

  constructor(options: McpKindOptions) {
    this.#options = options;
  }

  async authorize(context: BindingContext, options: unknown): Promise<McpOptions> {
    const { url, credential, tools, approval } = (options ?? {}) as { url?: unknown; credential?: unknown; tools?: unknown; approval?: unknown };
    if (!isMcpEnvironmentName(context.environment)) {
      throw serviceError(
        "invalid_argument",
        `MCP environment name ${JSON.stringify(context.environment)} must have at most ${MAX_MCP_ENVIRONMENT_NAME} characters and no "__": it prefixes its tools' names`,
      );
    }
    if (typeof url !== "string" || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw serviceError("invalid_argument", "an MCP environment needs the http(s) url of its server's MCP endpoint");
    }
    if (!originAllowed(this.#options.mcpAllow, url)) {
      throw serviceError("mcp_url_not_allowed", `MCP server url ${new URL(url).origin} is not within SERVICE_MCP_ALLOW`);
    }
    const names = (tools ?? []) as unknown[];
    if (!Array.isArray(names) || names.some((name) => typeof name !== "string" || name === "")) {
      throw serviceError("invalid_argument", "an MCP environment's tools are the server's tool names (non-empty strings)");
    }
    if (new Set(names).size !== names.length) throw serviceError("invalid_argument", "an MCP environment's tools name a tool twice");
    if (approval !== undefined && approval !== "" && approval !== "never" && approval !== "always")
      throw serviceError("invalid_argument", `an MCP environment's approval must be "always" or "never" (the default), not ${JSON.stringify(approval)}`);
    return {
      url,
      ...(typeof credential === "string" && credential !== "" ? { sealedCredential: this.#options.sealer.seal(credential) } : {}),
      tools: names as string[],
      ...(approval === "always" ? { approval: "always" as const } : {}),
    };
  }

  describe(options: McpOptions): unknown {
    return { url: options.url, tools: options.tools, ...(options.approval ? { approval: options.approval } : {}) };
  }

  async checkImplementation(context: BindingContext): Promise<unknown> {
    throw serviceError(
      "invalid_argument",
      `environment ${context.environment} is an MCP environment: its tools come from its server when it is set up (narrow them with its tools option)`,
    );
  }

  discoveredTools(setupOutput: string, options: McpOptions): DiscoveredTool[] {
    const { tools } = JSON.parse(setupOutput) as McpSetupOutput;
    return tools.map(({ name, tool, description, inputSchema }) => ({
      name,
      description,
      inputSchema: JSON.stringify(inputSchema),
      implementation: { mcpTool: tool },
      ...(options.approval ? { approval: options.approval } : {}),
    }));
  }

  bind(context: BindingContext, options: McpOptions): EnvironmentBinding {
    const { sealedCredential } = options;
    const { sealer } = this.#options;
    // Unsealed for each request, so the plaintext lives only as long as the request.
    const connection = new McpConnection(options.url, () => (sealedCredential ? unsealCredential(sealer, sealedCredential) : undefined));
    return redactingBinding(new McpBinding(connection, context, options.tools), () => (sealedCredential ? readableCredential(sealer, sealedCredential) : []));
  }
}
