import type { Artifacts, ArtifactRecord, Preparer } from "../../artifacts/index.ts";
import { readPreparationFile } from "../../artifacts/index.ts";
import type { Settings } from "../../config/index.ts";
import { serviceError } from "../../errors/index.ts";
import { Pool, WorkersDidNotStart, type ComponentRef } from "../../engine/index.ts";

/** The service environment: the worker pool plus its bridge to admitted artifacts. */
export interface ServiceEnvironment {
  /** Undefined when the service environment does not run on this server (`unavailable` says why). */
  pool: Pool | undefined;
  /** Why the worker sandbox could not start, for the operator (the server's log); undefined when it runs. */
  unavailable: string | undefined;
  /** What POST /v1/service-env/prepare calls. */
  preparer: Preparer;
  close(): Promise<void>;
}

/** What callers are told when the service environment does not run here: the operator's log has the cause. */
export const SANDBOX_UNAVAILABLE =
  "the service environment is not running on this server: its worker sandbox could not start (the server's log says why; the operator installs bubblewrap or sets SERVICE_ENV_SANDBOX=off)";

/**
 * Starts the pool and, when SERVICE_ENV_PREPARATION is set, admits the listed artifacts into
 * every workspace and prepares them on every worker before the server serves (spec §4.3 rule 7).
 * Any failure rejects, and startup stops, with one exception: when the workers' sandbox cannot
 * start (no bubblewrap, no user namespaces) and no preparation file needs them, the server runs
 * without the service environment, which refuses every use with `sandbox_unavailable`, rather
 * than run guests unisolated or not at all (docs/operations.md#the-sandbox).
 */
export async function startServiceEnvironment(settings: Settings, artifacts: Artifacts, workspaces: readonly string[]): Promise<ServiceEnvironment> {
  const startup = settings.env.preparationFile ? await readPreparationFile(settings.env.preparationFile) : [];
  let pool: Pool;
  try {
    // A custom loop's emits are journaled within the same limits as progress: past them the worker
    // drops them before they reach the server at all.
    const { maxEvents: maxEmits, maxBytes: maxEmitBytes } = settings.sessions.progress;
    pool = await Pool.start({ ...settings.env, dataDir: settings.dataDir, maxEmits, maxEmitBytes });
  } catch (error) {
    if (!(error instanceof WorkersDidNotStart) || !settings.env.sandbox) throw error;
    const reason = `${error.message}. The service environment runs each worker in a bubblewrap sandbox (Debian: apt-get install bubblewrap; it needs user namespaces, or root). Where none can run, SERVICE_ENV_SANDBOX=off starts it without OS isolation (docs/operations.md#the-sandbox)`;
    if (startup.length > 0) throw new Error(reason);
    return { pool: undefined, unavailable: reason, preparer: unavailablePreparer(), close: async () => undefined };
  }
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
  return { pool, unavailable: undefined, preparer, close: () => pool.close() };
}

function unavailablePreparer(): Preparer {
  return {
    prepare: async () => {
      throw serviceError("sandbox_unavailable", SANDBOX_UNAVAILABLE);
    },
  };
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
