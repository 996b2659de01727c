import { isEnvVarName } from "../../config/parsers.ts";
import type { FailureBody } from "./protocol.ts";
import type { SecretSource } from "./types.ts";

/**
 * The values of the granted secrets, read from `source` now, at dispatch, granted names only.
 * They travel to the worker in the invocation's message and are served from its memory at
 * /secrets: never written to disk, gone with the invocation.
 */
export function readSecrets(names: readonly string[], source: SecretSource | undefined): Map<string, string> | FailureBody {
  const values = new Map<string, string>();
  for (const name of names) {
    if (!isEnvVarName(name)) return { code: "invalid_argument", message: `secret ${JSON.stringify(name)} is not an environment variable name` };
    const value = source?.[name];
    if (value === undefined) return { code: "secret_unavailable", message: `granted secret ${name} is not set` };
    values.set(name, value);
  }
  return values;
}
