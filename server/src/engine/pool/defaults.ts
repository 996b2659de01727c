const MiB = 1024 * 1024;

/**
 * The pool's defaults for what PoolOptions leaves optional, written once: `normalize` (pool.ts)
 * fills them in, and the service's settings (config/settings.ts) use them as the defaults of
 * the matching SERVICE_ENV_* variables. The shares of one workspace are not here: the engine's
 * default is the whole pool, the service's half of it (see PoolOptions).
 */
export const POOL_DEFAULTS = {
  sandbox: true,
  workspaceQuotaBytes: 1024 * MiB,
  scratchQuotaBytes: 256 * MiB,
  maxOpenFiles: 256,
  /** The service passes its journal's progress limits (SERVICE_JOURNAL_MAX_PROGRESS_*) instead. */
  maxEmits: 100,
  maxEmitBytes: 16 * 1024,
  queueLength: 64,
  spareInstances: 2,
  spareMemoryMib: 256,
  compiledMemoryMib: 0,
  loadOnUseMib: 1,
  /**
   * Guests compute at a lower CPU priority than the server: where workers and the server share
   * cores, a guest computing until its deadline takes CPU time from its own worker's others, not
   * from the server's event loop, which serves every workspace.
   */
  workerNiceness: 10,
} as const;
