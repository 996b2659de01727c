import { covers, parseOrigin, type EnvironmentSettings, type Origin } from "../../../config/index.ts";
import { serviceError } from "../../../errors/index.ts";
import type { ServiceGrants } from "../../../engine/index.ts";
import { isWithin, realLocation } from "./paths.ts";

/** The deployment's allow-lists (spec §8), all empty by default. */
export type GrantAllowLists = Pick<EnvironmentSettings, "filesystemAllow" | "networkAllow" | "secretAllow">;

export interface GrantTarget {
  /** Where the environment's retained /workspace lives on this host. */
  workspaceRoot: string;
}

/**
 * Refuses, with grant_not_allowed naming the allow-list, any access the deployment does not
 * allow. The invocation-local /scratch exposes nothing of the host and needs no allow-list.
 */
export async function authorizeGrant(grant: ServiceGrants, allow: GrantAllowLists, target: GrantTarget): Promise<void> {
  if (grant.filesystem.workspace !== undefined) await authorizeWorkspace(target.workspaceRoot, allow.filesystemAllow);
  const allowedOrigins = parseAll(allow.networkAllow);
  for (const text of grant.network) {
    const wanted = parseOrigin(text);
    if (wanted === undefined || !allowedOrigins.some((allowed) => covers(allowed, wanted))) {
      throw notAllowed(`network origin ${text} is not within the network allow-list (SERVICE_ENV_NETWORK_ALLOW)`);
    }
  }
  for (const name of grant.secrets) {
    if (!allow.secretAllow.includes(name)) throw notAllowed(`secret ${name} is not in the secrets allow-list (SERVICE_ENV_SECRET_ALLOW)`);
  }
}

/** Compared as real locations, so neither `..` segments nor symlinks lead outside an allowed root. */
async function authorizeWorkspace(workspaceRoot: string, allowedRoots: readonly string[]): Promise<void> {
  const root = await realLocation(workspaceRoot);
  for (const allowed of allowedRoots) {
    if (isWithin(await realLocation(allowed), root)) return;
  }
  // The message leaves the host path out: callers learn which allow-list refused, not the layout.
  throw notAllowed("filesystem.workspace: the environment's workspace root is not under the filesystem allow-list (SERVICE_ENV_FILESYSTEM_ALLOW)");
}

/** Allow-list entries that are not origins (settings validation keeps them out) allow nothing. */
function parseAll(texts: readonly string[]): Origin[] {
  return texts.map(parseOrigin).filter((origin) => origin !== undefined);
}

function notAllowed(message: string) {
  return serviceError("grant_not_allowed", message);
}
