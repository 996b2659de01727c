import { validateSkillName } from "@skillenv/client/bundle";
import {
  readModifyWrite,
  readPage,
  workspaceKey,
  workspaceRange,
  type ConditionalReads,
  type Page,
  type PageRequest,
  type Store,
  type Table,
  type WriteOp,
} from "../storage/index.ts";
import type { BundleFile } from "./bundle/index.ts";

/** What the registry stores per (workspace, name): metadata only; bytes stay in the blob store. */
export interface SkillRecord {
  name: string;
  description: string;
  contentHash: string;
  bundleBytes: number;
  fileCount: number;
  totalFileBytes: number;
  /**
   * Every file's path and size, in records written before the listing was kept beside them
   * (SkillRecords.files); older ones still have neither: read from the bundle.
   */
  files?: BundleFile[];
  createdAt: string;
  updatedAt: string;
  /** The current version (SkillVersions); absent in records last written before versions were kept. */
  version?: number;
}

/**
 * What an update decided: a new record and its file listing, with more ops of the same batch
 * (its version), or to keep the current one; and what to answer.
 */
export type SkillUpdate<T> = { record: SkillRecord; files: BundleFile[]; ops: WriteOp[]; result: T } | { result: T };

/** Records read at a time by the start-up migration. */
const MIGRATION_PAGE = 200;
/** The migration that gave every skill its version 1. */
const VERSIONS_MIGRATION = "versions";

/**
 * The skills table, keyed `<workspace>/<name>` so a workspace's range scan never reaches another's,
 * and beside it each skill's file listing: up to SERVICE_SKILL_MAX_ENTRIES paths of up to 64 KiB,
 * which only GetSkill answers, so that the records a listing reads stay a few KB each.
 */
export class SkillRecords {
  readonly #store: Store;
  readonly #skills: Table<SkillRecord>;
  readonly #files: Table<BundleFile[]>;
  readonly #migrations: Table<{ at: string }>;

  constructor(store: Store) {
    this.#store = store;
    this.#skills = store.table<SkillRecord>("skills");
    this.#files = store.table<BundleFile[]>("skill-files");
    this.#migrations = store.table<{ at: string }>("skill-migrations");
  }

  get(workspace: string, name: string): Promise<SkillRecord | undefined> {
    return this.#skills.get(workspaceKey(workspace, name));
  }

  /**
   * Replaces the named record (and its file listing, in one atomic batch) with what `decide` makes
   * of the current one, or keeps it when `decide` answers undefined. Safe with several writers,
   * in this process or others: when the record changed meanwhile, `decide` runs again on the new one.
   */
  update<T>(workspace: string, name: string, decide: (existing: SkillRecord | undefined, reads: ConditionalReads) => Promise<SkillUpdate<T>>): Promise<T> {
    const key = workspaceKey(workspace, name);
    return readModifyWrite(this.#store, async (reads) => {
      const decision = await decide(await reads.get(this.#skills, key), reads);
      if (!("record" in decision)) return { ops: [], result: decision.result };
      return { ops: [this.#skills.putOp(key, decision.record), this.#files.putOp(key, decision.files), ...decision.ops], result: decision.result };
    });
  }

  /** The record, read as a condition of the caller's batch. */
  getIn(reads: ConditionalReads, workspace: string, name: string): Promise<SkillRecord | undefined> {
    return reads.get(this.#skills, workspaceKey(workspace, name));
  }

  /** The skill's file listing, unless its record predates it being kept. */
  files(workspace: string, name: string): Promise<BundleFile[] | undefined> {
    return this.#files.get(workspaceKey(workspace, name));
  }

  /** Deletes the record and answers it as it was; undefined when it was gone already. */
  delete(workspace: string, name: string): Promise<SkillRecord | undefined> {
    const key = workspaceKey(workspace, name);
    return readModifyWrite(this.#store, async (reads) => {
      const existing = await reads.get(this.#skills, key);
      return { ops: existing ? [this.#skills.deleteOp(key), this.#files.deleteOp(key)] : [], result: existing };
    });
  }

  /**
   * Every record last written before versions were kept, with its workspace (SkillRegistry.migrate),
   * read in pages of MIGRATION_PAGE so that no more than a page of records is held at once.
   */
  async *unversioned(): AsyncGenerator<{ workspace: string; record: SkillRecord }> {
    for (let after: string | undefined; ; ) {
      const entries = await this.#skills.entries({ ...(after === undefined ? {} : { gt: after }), limit: MIGRATION_PAGE });
      for (const [key, record] of entries) {
        if (record.version === undefined) yield { workspace: key.slice(0, key.indexOf("/")), record };
      }
      if (entries.length < MIGRATION_PAGE) return;
      after = entries.at(-1)![0];
    }
  }

  /** Whether a start-up found every record versioned already (then later ones need not look again). */
  async migrated(): Promise<boolean> {
    return (await this.#migrations.get(VERSIONS_MIGRATION)) !== undefined;
  }

  markMigrated(): Promise<void> {
    return this.#migrations.put(VERSIONS_MIGRATION, { at: new Date().toISOString() });
  }

  /** A page of the workspace's skills in name order; a page token carries the last name. */
  page(workspace: string, request: PageRequest, maxBytes: number): Promise<Page<SkillRecord>> {
    const isCursor = (name: string) => validateSkillName(name) === undefined;
    return readPage(this.#skills, request, { prefix: workspaceRange(workspace).gt, isCursor, maxBytes });
  }
}
