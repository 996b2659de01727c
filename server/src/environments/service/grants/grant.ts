import { formatOrigin, isEnvVarName, parseOrigin } from "../../../config/index.ts";
import type { AccessMode, ServiceGrants } from "../../../engine/index.ts";
import { serviceError } from "../../../errors/index.ts";

const MODES: readonly string[] = ["read", "write"];
const GRANT_FIELDS = ["filesystem", "network", "secrets"];
const FILESYSTEM_FIELDS = ["workspace", "scratch"];

/**
 * Parses service-environment grants (spec §2.3) as they arrive in JSON: `{filesystem?:
 * {workspace?, scratch?}, network?, secrets?}`, into their normal form: origins canonical,
 * repetitions dropped, omitted access absent (denied). Anything malformed, unknown fields
 * included, is invalid_grant naming the field. Allow-lists are checked separately
 * (authorizeGrant).
 */
export function parseGrants(value: unknown): ServiceGrants {
  const grant = object(value ?? {}, "the grants", GRANT_FIELDS);
  return {
    filesystem: parseFilesystem(grant.filesystem),
    network: unique(strings(grant.network, "network").map(parseNetworkOrigin)),
    secrets: unique(strings(grant.secrets, "secrets").map(parseSecretName)),
  };
}

function parseFilesystem(value: unknown): ServiceGrants["filesystem"] {
  if (value === undefined) return {};
  const filesystem = object(value, "filesystem", FILESYSTEM_FIELDS);
  const result: ServiceGrants["filesystem"] = {};
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
  if (!isEnvVarName(text)) throw invalid(`secret ${JSON.stringify(text)} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]{0,127})`);
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
