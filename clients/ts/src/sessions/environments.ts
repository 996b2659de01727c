import type { HostEnvironmentDefinition } from "../hosts/host-env.ts";
import type { ExtensionEnvironmentDefinition } from "./extension.ts";
import type { McpEnvironmentDefinition } from "./mcp.ts";

/** Access to a directory of the service environment (spec §2.3). */
export type AccessMode = "read" | "write";

/**
 * "automatic": set up before the session is created. "manual": waits for
 * `session.setupEnvironment(name)`.
 */
export type SetupMode = "automatic" | "manual";

export interface ServiceEnvOptions {
  /** The environment's name in a session: ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$. */
  name: string;
  /** `workspace`: the retained /workspace; `scratch`: an empty /scratch per invocation. */
  filesystem?: { workspace?: AccessMode; scratch?: AccessMode };
  /** HTTP(S) origins the tools may call, e.g. "https://api.example.com" or "https://*.example.com". */
  network?: string[];
  /** Names of the server's environment variables, mounted read-only under /secrets. */
  secrets?: string[];
  /** Default "automatic". */
  setup?: SetupMode;
}

/** The service environment with its grants: the server's worker pool. Omitted access is denied. */
export interface ServiceEnvironmentDefinition {
  readonly kind: "service";
  readonly name: string;
  readonly setup: SetupMode;
  readonly filesystem: { readonly workspace?: AccessMode; readonly scratch?: AccessMode };
  readonly network: readonly string[];
  readonly secrets: readonly string[];
}

/**
 * Where a session's tools run, told apart by `kind`: the service environment (`serviceEnv`),
 * the caller's own process (`hostEnv`), an extension reached over HTTP (`environment(...)`), or
 * an MCP server (`mcpEnv`).
 */
export type EnvironmentDefinition = ServiceEnvironmentDefinition | HostEnvironmentDefinition | ExtensionEnvironmentDefinition | McpEnvironmentDefinition;

/**
 * Defines a service environment. Performs no I/O (spec §4.3 rule 2): the server checks the
 * grants against its allow-lists when a session binds the environment. The definition is
 * frozen, so one value can serve several sessions.
 */
export function serviceEnv(options: ServiceEnvOptions): ServiceEnvironmentDefinition {
  return Object.freeze({
    kind: "service",
    name: options.name,
    setup: options.setup ?? "automatic",
    filesystem: Object.freeze({ ...options.filesystem }),
    network: Object.freeze([...(options.network ?? [])]),
    secrets: Object.freeze([...(options.secrets ?? [])]),
  });
}
