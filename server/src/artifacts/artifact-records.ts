import { workspaceKey, type Sha256Hex, type Store, type Table } from "../storage/index.ts";
import type { ArtifactKind } from "./kinds.ts";

/** A workspace's admission of an artifact: metadata only; the bytes stay in the blob store. */
export interface ArtifactRecord {
  kind: ArtifactKind;
  id: Sha256Hex;
  sizeBytes: number;
  admittedAt: string;
  /** Components only. */
  world?: string;
  /** Components only: the top-level import names. */
  imports?: string[];
}

/**
 * The artifacts table, keyed `<workspace>/<kind>/<id>`: the only way a workspace learns that an
 * artifact exists, so the shared blob store is no cross-workspace oracle.
 */
export class ArtifactRecords {
  readonly #artifacts: Table<ArtifactRecord>;

  constructor(store: Store) {
    this.#artifacts = store.table<ArtifactRecord>("artifacts");
  }

  get(workspace: string, kind: ArtifactKind, id: Sha256Hex): Promise<ArtifactRecord | undefined> {
    return this.#artifacts.get(workspaceKey(workspace, `${kind}/${id}`));
  }

  put(workspace: string, record: ArtifactRecord): Promise<void> {
    return this.#artifacts.put(workspaceKey(workspace, `${record.kind}/${record.id}`), record);
  }
}
