import { serviceError } from "../errors/index.ts";
import type { BlobStore } from "../storage/index.ts";
import type { ArtifactRecord } from "./artifact-records.ts";
import { KIND_LABELS } from "./kinds.ts";

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

/**
 * Stands in until the worker pool lands: loads nothing, only checks that each artifact's bytes
 * are in the blob store, so the prepare endpoint works end to end now.
 */
export function blobPresencePreparer(blobs: BlobStore): Preparer {
  return {
    async prepare(artifacts) {
      for (const artifact of artifacts) {
        if ((await blobs.stat(artifact.id)) !== artifact.sizeBytes) {
          throw serviceError("preparation_failed", `${KIND_LABELS[artifact.kind]} ${artifact.id}: its bytes are missing from the blob store`, {
            artifact: artifact.id,
          });
        }
      }
    },
  };
}
