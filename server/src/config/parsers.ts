/** Small value parsers for settings. Each throws an Error whose message states the accepted form. */

import { formatOrigin, parseOrigin } from "./origins.ts";

export function parsePositiveInt(raw: string): number {
  if (!/^[1-9][0-9]*$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new Error("expected a positive integer, e.g. 4");
  }
  return Number(raw);
}

/** A positive integer, or 0 (which a setting reads as "off" or "unbounded"). */
export function parseZeroOrPositiveInt(raw: string): number {
  return raw.trim() === "0" ? 0 : parsePositiveInt(raw);
}

/**
 * SERVICE_DATABASE_URL: a `postgres://` or `postgresql://` URL (libpq's form, as the pg client
 * reads it). Its password must never reach a log, so no message here repeats the value.
 */
export function parseDatabaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error("expected a URL, postgres://user:password@host:port/database");
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new Error("expected a postgres:// or postgresql:// URL (PostgreSQL is the only shared metadata database)");
  }
  return raw;
}

export function parseBoolean(raw: string): boolean {
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw new Error("expected true or false");
}

/** `on` or `off`, nothing else (SERVICE_ENV_SANDBOX, SERVICE_RUN_RESUME): turning a protection off is spelled out. */
export function parseOnOff(raw: string): boolean {
  if (raw === "on") return true;
  if (raw === "off") return false;
  throw new Error("expected on or off");
}

export function parseOpenAIApi(raw: string): "responses" | "chat-completions" {
  if (raw === "responses" || raw === "chat-completions") return raw;
  throw new Error("expected responses or chat-completions");
}

export interface ListenAddress {
  host: string;
  port: number;
}

export function parseListen(raw: string): ListenAddress {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/.exec(raw);
  const port = Number(match?.[3]);
  if (!match || port > 65535) {
    throw new Error("expected host:port, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::1]:8080 (port 0 picks a free port)");
  }
  return { host: match[1] ?? match[2] ?? "", port };
}

/** A comma-separated list; blanks around items are ignored, empty items are not allowed. */
export function parseList(raw: string): string[] {
  if (raw.trim() === "") return [];
  const items = raw.split(",").map((item) => item.trim());
  if (items.some((item) => item === "")) throw new Error("expected a comma-separated list without empty items");
  return items;
}

const WORKSPACE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const API_KEY = /^[A-Za-z0-9_.~+/=-]{16,256}$/;

export function isWorkspaceName(name: string): boolean {
  return WORKSPACE.test(name);
}

/** `workspace=key,workspace=key`; a workspace may have several keys, a key belongs to one workspace. */
export function parseApiKeys(raw: string): Map<string, string> {
  const keys = new Map<string, string>();
  for (const item of parseList(raw)) {
    const eq = item.indexOf("=");
    const workspace = item.slice(0, eq);
    const key = item.slice(eq + 1);
    if (eq < 0 || !WORKSPACE.test(workspace) || !API_KEY.test(key)) {
      throw new Error(
        "expected workspace=key pairs separated by commas; workspace matches [A-Za-z0-9][A-Za-z0-9_.-]{0,63}, key is 16-256 characters of [A-Za-z0-9_.~+/=-]",
      );
    }
    if (keys.has(key)) throw new Error("a key is listed twice; every key belongs to exactly one workspace");
    keys.set(key, workspace);
  }
  if (keys.size === 0) throw new Error("expected at least one workspace=key pair");
  return keys;
}

/**
 * Allowed network origins, by the rule grants are checked with (origins.ts): exact
 * `scheme://host[:port]` (a name or an IP literal, IPv6 bracketed), or `https://*.<domain>[:port]`;
 * kept in canonical form (lowercase, default port dropped).
 */
export function parseOrigins(raw: string): string[] {
  return parseList(raw).map((text) => {
    const origin = parseOrigin(text);
    if (!origin) throw new Error(`expected origins like https://api.example.com, https://*.example.com or http://[::1]:8080, got ${JSON.stringify(text)}`);
    return formatOrigin(origin);
  });
}

export function parseAbsolutePaths(raw: string): string[] {
  return parseList(raw).map((path) => {
    if (!path.startsWith("/")) throw new Error(`expected absolute paths, got ${JSON.stringify(path)}`);
    return path;
  });
}

/** Names of process environment variables (the names secrets are granted by): one rule everywhere. */
const ENV_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export function isEnvVarName(name: string): boolean {
  return ENV_VAR_NAME.test(name);
}

export function parseEnvNames(raw: string): string[] {
  return parseList(raw).map((name) => {
    if (!isEnvVarName(name)) throw new Error(`expected environment variable names, got ${JSON.stringify(name)}`);
    return name;
  });
}

export function parseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error("expected an absolute http(s) URL, e.g. https://skills.example.com");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("expected an http or https URL");
  return url.origin + url.pathname.replace(/\/+$/, "");
}
