// The C library's malloc settings the service runs with (docs/operations.md#process-memory).
// glibc reads them from the environment when a process starts, so they cannot be SERVICE_*
// settings read later: the entry point replaces the process with itself when they are missing.

/**
 * glibc raises its mmap threshold each time a large block is freed (up to 32 MiB); after that,
 * the many-megabyte buffers of preparation come from the malloc heap, where freed space stays in
 * the process. A fixed threshold keeps them in mappings of their own, returned when freed.
 */
export const MALLOC_ENVIRONMENT: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: "131072" };

/**
 * On Linux, when a setting of MALLOC_ENVIRONMENT is missing from the environment (and the
 * operator tuned none through GLIBC_TUNABLES), replaces this process with the same command, the
 * settings added: same pid, arguments, Node flags and open descriptors. Returns otherwise.
 */
export function ensureMallocEnvironment(): void {
  if (process.platform !== "linux" || process.execve === undefined || process.env.GLIBC_TUNABLES !== undefined) return;
  const missing = Object.entries(MALLOC_ENVIRONMENT).filter(([name]) => process.env[name] === undefined);
  if (missing.length === 0) return;
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, ...Object.fromEntries(missing) });
}
