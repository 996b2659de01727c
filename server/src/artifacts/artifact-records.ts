import { readModifyWrite, workspaceKey, type Sha256Hex, type Store, type Table } from "../storage/index.ts";
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
  readonly #store: Store;
  readonly #artifacts: Table<ArtifactRecord>;

  constructor(store: Store) {
    this.#store = store;
    this.#artifacts = store.table<ArtifactRecord>("artifacts");
  }

  get(workspace: string, kind: ArtifactKind, id: Sha256Hex): Promise<ArtifactRecord | undefined> {
    return this.#artifacts.get(workspaceKey(workspace, `${kind}/${id}`));
  }

  /**
   * Stores the record unless the workspace admitted the artifact already, and answers the record
   * that holds: of two admissions at once, in this process or another, the first one's.
   */
  putIfAbsent(workspace: string, record: ArtifactRecord): Promise<ArtifactRecord> {
    const key = workspaceKey(workspace, `${record.kind}/${record.id}`);
    return readModifyWrite(this.#store, async (reads) => {
      const existing = await reads.get(this.#artifacts, key);
      return existing ? { ops: [], result: existing } : { ops: [this.#artifacts.putOp(key, record)], result: record };
    });
  }
}
