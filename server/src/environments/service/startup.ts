import type { Artifacts, ArtifactRecord, Preparer } from "../../artifacts/index.ts";
import { readPreparationFile } from "../../artifacts/index.ts";
import type { Settings } from "../../config/index.ts";
import { Pool, type ComponentRef } from "../../engine/index.ts";

/** The service environment: the worker pool plus its bridge to admitted artifacts. */
export interface ServiceEnvironment {
  pool: Pool;
  /** What POST /v1/service-env/prepare calls. */
  preparer: Preparer;
  close(): Promise<void>;
}

/**
 * Starts the pool and, when SERVICE_ENV_PREPARATION is set, admits the listed artifacts into
 * every workspace and prepares them on every worker before the server serves (spec §4.3 rule 7).
 * Any failure rejects, and startup stops.
 */
export async function startServiceEnvironment(settings: Settings, artifacts: Artifacts, workspaces: readonly string[]): Promise<ServiceEnvironment> {
  const startup = settings.env.preparationFile ? await readPreparationFile(settings.env.preparationFile) : [];
  const pool = await Pool.start({ ...settings.env, dataDir: settings.dataDir }).catch((error: unknown) => {
    if (!settings.env.sandbox) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `${reason}. The service environment runs each worker in a bubblewrap sandbox (Debian: apt-get install bubblewrap; it needs user namespaces). Where none can run, SERVICE_ENV_SANDBOX=off starts it without OS isolation (docs/operations.md#the-sandbox)`,
    );
  });
  const preparer = poolPreparer(pool, artifacts);
  try {
    const records: ArtifactRecord[] = [];
    for (const workspace of workspaces) {
      for (const artifact of startup) records.push(await artifacts.admit(workspace, artifact.kind, artifact.bytes));
    }
    await preparer.prepare(records);
  } catch (error) {
    await pool.close();
    throw error;
  }
  return { pool, preparer, close: () => pool.close() };
}

/** The ref the pool prepares from: bytes are read only if no persisted preparation exists. */
export function componentRef(artifacts: Artifacts, id: string): ComponentRef {
  return { id, load: () => artifacts.bytes(id) };
}

/**
 * Components are loaded on every worker. Programs need no worker-side loading: their source is
 * handed to the runtime at invocation; preparing one checks its source is readable.
 */
function poolPreparer(pool: Pool, artifacts: Artifacts): Preparer {
  return {
    async prepare(records) {
      const unique = new Map(records.map((record) => [record.id, record]));
      await Promise.all(
        [...unique.values()].map((record) =>
          record.kind === "program" ? artifacts.bytes(record.id).then(() => undefined) : pool.prepare(componentRef(artifacts, record.id)),
        ),
      );
    },
  };
}
