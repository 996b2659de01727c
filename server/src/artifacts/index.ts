import type { ServiceImpl } from "@connectrpc/connect";
import type { ArtifactService } from "../../../gen/skillenv/env/v1/artifacts_pb.js";
import type { Assets } from "../assets/index.ts";
import type { BlobStore, Store } from "../storage/index.ts";
import { Admission, type AdmissionLimits } from "./admission.ts";
import { ArtifactRecords, type ArtifactRecord } from "./artifact-records.ts";
import { createArtifactService } from "./artifact-service.ts";
import type { ArtifactKind } from "./kinds.ts";
import type { Preparer } from "./preparer.ts";

export { ArtifactService } from "../../../gen/skillenv/env/v1/artifacts_pb.js";
export { MAX_PREPARE_ARTIFACTS } from "./artifact-service.ts";
export type { Preparer } from "./preparer.ts";
export type { AdmissionLimits } from "./admission.ts";
export { PreparationFileError, readPreparationFile, type StartupArtifact } from "./preparation-file.ts";
export type { ArtifactRecord } from "./artifact-records.ts";
export type { ArtifactKind, ComponentKind } from "./kinds.ts";

export interface ArtifactsOptions {
  store: Store;
  blobs: BlobStore;
  assets: Assets;
  limits: AdmissionLimits;
}

/** Server-internal API of admitted artifacts (the pool, the preparation file, sessions). */
export interface Artifacts {
  /** The Connect service; prepare requests go to `preparer` (the worker pool). */
  service(preparer: Preparer): ServiceImpl<typeof ArtifactService>;
  /** Admits bytes as the workspace's artifact of `kind`, with the checks of the endpoints. */
  admit(workspace: string, kind: ArtifactKind, bytes: Uint8Array): Promise<ArtifactRecord>;
  /** The workspace's admission record; not_found when the workspace did not admit it. */
  get(workspace: string, kind: ArtifactKind, id: string): Promise<ArtifactRecord>;
  /** An artifact's bytes by id; resolve the id with get() first, which checks the workspace. */
  bytes(id: string): Promise<Uint8Array>;
  /** The UTF-8 source of a program the workspace admitted. */
  source(workspace: string, programId: string): Promise<string>;
}

export function createArtifacts(options: ArtifactsOptions): Artifacts {
  const admission = new Admission(new ArtifactRecords(options.store), options.blobs, options.assets, options.limits);
  return {
    service: (preparer) => createArtifactService(admission, preparer),
    admit: (workspace, kind, bytes) =>
      kind === "program" ? admission.admitProgram(workspace, bytes) : admission.admitComponent(workspace, kind, { local: bytes }),
    get: (workspace, kind, id) => admission.get(workspace, kind, id),
    bytes: (id) => admission.bytes(id),
    source: (workspace, programId) => admission.source(workspace, programId),
  };
}
