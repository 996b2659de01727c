import { validateSkillName } from "@skillenv/client/bundle";
import type { AssetRecord, Assets } from "../assets/index.ts";
import { checkSha256 } from "../assets/index.ts";
import { serviceError } from "../errors/index.ts";
import { KeyedLock, type Page, type PageRequest } from "../storage/index.ts";
import type { BundleFile } from "./bundle/index.ts";
import type { SkillRecord, SkillRecords, SkillUpdate } from "./skill-records.ts";
import type { StoredBundles } from "./stored-bundles.ts";

export interface PutResult {
  record: SkillRecord;
  changed: boolean;
}

export interface SkillFiles {
  record: SkillRecord;
  files: Map<string, Uint8Array>;
}

/**
 * The workspace skill registry: binds names to validated bundles. Validation happens before
 * any write, so a refused bundle changes nothing; upserts of one name are serialised.
 */
export class SkillRegistry {
  readonly #records: SkillRecords;
  readonly #assets: Assets;
  readonly #bundles: StoredBundles;
  readonly #lock = new KeyedLock();
  /** SERVICE_LIST_MAX_BYTES: a page's byte budget. */
  readonly #listMaxBytes: number;

  constructor(records: SkillRecords, assets: Assets, bundles: StoredBundles, listMaxBytes: number) {
    this.#records = records;
    this.#assets = assets;
    this.#bundles = bundles;
    this.#listMaxBytes = listMaxBytes;
  }

  async put(workspace: string, name: string, contentHash: string): Promise<PutResult> {
    checkName(name);
    checkSha256(contentHash);
    // The lock keeps this process's puts of one name from validating in parallel only to conflict;
    // the conditional update keeps puts through several processes to one consistent record.
    return this.#lock.run(`${workspace}/${name}`, () =>
      this.#records.update(workspace, name, async (existing): Promise<SkillUpdate<PutResult>> => {
        if (existing?.contentHash === contentHash) return { result: { record: existing, changed: false } };
        const { record, files } = await this.#validatedRecord(workspace, name, contentHash, existing);
        return { record, files, result: { record, changed: true } };
      }),
    );
  }

  async get(workspace: string, name: string): Promise<SkillRecord> {
    checkName(name);
    const record = await this.#records.get(workspace, name);
    if (!record) throw serviceError("skill_not_found", `this workspace has no skill named ${JSON.stringify(name)}`);
    return record;
  }

  async delete(workspace: string, name: string): Promise<void> {
    await this.#lock.run(`${workspace}/${name}`, async () => {
      await this.get(workspace, name);
      await this.#records.delete(workspace, name);
    });
  }

  /** A page of skills in name order. */
  list(workspace: string, request: PageRequest): Promise<Page<SkillRecord>> {
    return this.#records.page(workspace, request, this.#listMaxBytes);
  }

  /** The skill's metadata with every file's path and size (never the bytes). */
  async listing(workspace: string, name: string): Promise<SkillRecord & { files: BundleFile[] }> {
    const record = await this.get(workspace, name);
    const files = record.files ?? (await this.#records.files(workspace, name));
    if (files) return { ...record, files };
    return { ...record, files: (await this.#bundles.inspect(await this.#bundleOf(workspace, record))).listing };
  }

  /** The bundle's files, for staging and the `skills` meta-tool: server-internal, never on the wire. */
  async files(workspace: string, name: string): Promise<SkillFiles> {
    const record = await this.get(workspace, name);
    const bundle = await this.#bundles.files(await this.#bundleOf(workspace, record));
    return { record, files: bundle.files };
  }

  /** A bundle's files from its bytes (a run's snapshot, read back when the run resumes), checked as any bundle is. */
  async bundleFiles(bytes: Uint8Array): Promise<Map<string, Uint8Array>> {
    return (await this.#bundles.filesOf(bytes)).files;
  }

  /** The finalized asset holding a stored skill's bundle. */
  async #bundleOf(workspace: string, record: SkillRecord): Promise<AssetRecord> {
    const asset = await this.#assets.finalized(workspace, record.contentHash);
    if (!asset) throw serviceError("asset_not_found", `the bundle of skill ${record.name} is no longer available`);
    return asset;
  }

  async #validatedRecord(
    workspace: string,
    name: string,
    contentHash: string,
    existing: SkillRecord | undefined,
  ): Promise<{ record: SkillRecord; files: BundleFile[] }> {
    const asset = await this.#assets.finalized(workspace, contentHash);
    if (!asset) {
      throw serviceError("asset_not_found", `no finalized asset ${contentHash} in this workspace; upload the bundle first`);
    }
    const bundle = await this.#bundles.inspect(asset);
    const now = new Date().toISOString();
    const record = {
      name,
      description: bundle.description,
      contentHash,
      bundleBytes: asset.sizeBytes,
      fileCount: bundle.fileCount,
      totalFileBytes: bundle.totalBytes,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    };
    return { record, files: bundle.listing };
  }
}

function checkName(name: string): void {
  const problem = validateSkillName(name);
  if (problem) throw serviceError("invalid_skill_name", problem);
}
