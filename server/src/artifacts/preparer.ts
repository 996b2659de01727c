import type { ArtifactRecord } from "./artifact-records.ts";

/**
 * Loads admitted artifacts on the workers ahead of use (spec §4.3); the worker pool implements
 * it. The artifacts are already resolved for the caller's workspace; their bytes come from
 * Artifacts.bytes(id).
 */
export interface Preparer {
  /**
   * Resolves once every artifact is loaded on every eligible worker; for artifacts already
   * loaded it checks their readiness again. Rejects with preparation_failed naming the artifact
   * and the cause; other stable errors (e.g. unavailable while shutting down) pass through.
   */
  prepare(artifacts: readonly ArtifactRecord[]): Promise<void>;
}
