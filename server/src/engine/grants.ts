/**
 * The authority an invocation runs with (SPEC 2.3): names and modes only, never secret values.
 * Parsed and checked against the deployment's allow-lists before it reaches the engine
 * (environments/service/grants); the engine enforces it inside the guest's imports.
 */
export interface ServiceGrants {
  filesystem: { workspace?: AccessMode; scratch?: AccessMode };
  /** Canonical origins. */
  network: string[];
  /** Names of process environment variables. */
  secrets: string[];
}

export type AccessMode = "read" | "write";
