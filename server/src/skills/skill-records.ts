import { validateSkillName } from "@skillenv/client/bundle";
import { readPage, workspaceKey, workspaceRange, type Page, type PageRequest, type Store, type Table } from "../storage/index.ts";
import type { BundleFile } from "./bundle/index.ts";

/** What the registry stores per (workspace, name): metadata only; bytes stay in the blob store. */
export interface SkillRecord {
  name: string;
  description: string;
  contentHash: string;
  bundleBytes: number;
  fileCount: number;
  totalFileBytes: number;
  /** Every file's path and size (records written before it was kept have none: read from the bundle). */
  files?: BundleFile[];
  createdAt: string;
  updatedAt: string;
}

/** The skills table, keyed `<workspace>/<name>` so a workspace's range scan never reaches another's. */
export class SkillRecords {
  readonly #skills: Table<SkillRecord>;

  constructor(store: Store) {
    this.#skills = store.table<SkillRecord>("skills");
  }

  get(workspace: string, name: string): Promise<SkillRecord | undefined> {
    return this.#skills.get(workspaceKey(workspace, name));
  }

  put(workspace: string, record: SkillRecord): Promise<void> {
    return this.#skills.put(workspaceKey(workspace, record.name), record);
  }

  delete(workspace: string, name: string): Promise<void> {
    return this.#skills.delete(workspaceKey(workspace, name));
  }

  /** A page of the workspace's skills in name order; a page token carries the last name. */
  page(workspace: string, request: PageRequest, maxBytes: number): Promise<Page<SkillRecord>> {
    const isCursor = (name: string) => validateSkillName(name) === undefined;
    return readPage(this.#skills, request, { prefix: workspaceRange(workspace).gt, isCursor, maxBytes });
  }
}
