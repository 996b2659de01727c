import { serviceError } from "../errors/index.ts";
import { formatOrigin, parseOrigin } from "./origins.ts";

export type AccessMode = "read" | "write";

/** A service-environment grant (spec §2.3), validated and normalised. Omitted access is denied. */
export interface ServiceEnvGrant {
  /** Identifies the environment in a session. */
  name: string;
  filesystem: {
    /** The retained /workspace of the session and environment. */
    workspace?: AccessMode;
    /** An invocation-local /scratch. */
    scratch?: AccessMode;
  };
  /** Canonical origins (see formatOrigin), without repetitions. */
  network: string[];
  /** Names of process environment variables mounted read-only under /secrets; never their values. */
  secrets: string[];
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MODES: readonly string[] = ["read", "write"];
const GRANT_FIELDS = ["name", "filesystem", "network", "secrets"];
const FILESYSTEM_FIELDS = ["workspace", "scratch"];

/**
 * Parses a grant as it arrives in JSON: `{name, filesystem?: {workspace?, scratch?}, network?,
 * secrets?}`. Anything malformed, unknown fields included, is invalid_grant naming the field.
 * Allow-lists are checked separately (authorizeGrant).
 */
export function parseGrant(value: unknown): ServiceEnvGrant {
  const grant = object(value, "the grant", GRANT_FIELDS);
  return {
    name: parseName(grant.name),
    filesystem: parseFilesystem(grant.filesystem),
    network: unique(strings(grant.network, "network").map(parseNetworkOrigin)),
    secrets: unique(strings(grant.secrets, "secrets").map(parseSecretName)),
  };
}

function parseName(value: unknown): string {
  if (typeof value !== "string" || !NAME.test(value)) {
    throw invalid("name must be 1-64 characters of [A-Za-z0-9_-], starting with a letter or digit");
  }
  return value;
}

function parseFilesystem(value: unknown): ServiceEnvGrant["filesystem"] {
  if (value === undefined) return {};
  const filesystem = object(value, "filesystem", FILESYSTEM_FIELDS);
  const result: ServiceEnvGrant["filesystem"] = {};
  for (const field of FILESYSTEM_FIELDS as ("workspace" | "scratch")[]) {
    const mode = filesystem[field];
    if (mode === undefined) continue;
    if (typeof mode !== "string" || !MODES.includes(mode)) throw invalid(`filesystem.${field} must be "read" or "write"`);
    result[field] = mode as AccessMode;
  }
  return result;
}

function parseNetworkOrigin(text: string): string {
  const origin = parseOrigin(text);
  if (origin === undefined) {
    throw invalid(`network origin ${JSON.stringify(text)} is not an origin like https://api.example.com, http://host:8080 or https://*.example.com`);
  }
  return formatOrigin(origin);
}

function parseSecretName(text: string): string {
  if (!SECRET_NAME.test(text)) throw invalid(`secret ${JSON.stringify(text)} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)`);
  return text;
}

function object(value: unknown, what: string, fields: readonly string[]): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid(`${what} must be a JSON object`);
  const unknown = Object.keys(value).find((key) => !fields.includes(key));
  if (unknown !== undefined) throw invalid(`${what} has an unknown field ${JSON.stringify(unknown)}`);
  return value as Record<string, unknown>;
}

function strings(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) throw invalid(`${field} must be an array of strings`);
  return value;
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

function invalid(message: string) {
  return serviceError("invalid_grant", message);
}
