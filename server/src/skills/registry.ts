import { setTimeout as sleep } from "node:timers/promises";
import { validateSkillName } from "@skillenv/client/bundle";
import type { AssetRecord, Assets } from "../assets/index.ts";
import { checkSha256 } from "../assets/index.ts";
import { serviceError } from "../errors/index.ts";
import { KeyedLock, readModifyWrite, WriteConflict, type ConditionalReads, type Page, type PageRequest, type Store } from "../storage/index.ts";
import type { BundleFile, BundleSummary } from "./bundle/index.ts";
import type { SkillRecord, SkillRecords } from "./skill-records.ts";
import type { SkillVersionRecord, SkillVersions } from "./skill-versions.ts";
import type { StoredBundles } from "./stored-bundles.ts";

export interface PutResult {
  record: SkillRecord;
  changed: boolean;
}

export interface RollbackResult extends PutResult {
  version: SkillVersionRecord;
}

/** A skill's current content, read whole from its bundle. */
export interface SkillContent {
  record: SkillRecord;
  /** Every file's bytes, in canonical (UTF-8 path) order. */
  files: Map<string, Uint8Array>;
  /** SKILL.md's frontmatter as JSON. */
  frontmatter: Record<string, unknown>;
}

/** A version as a run resolved it. */
export interface ResolvedSkill {
  version: SkillVersionRecord;
  files: Map<string, Uint8Array>;
}

export interface RegistrySettings {
  /** SERVICE_LIST_MAX_BYTES: a page's byte budget. */
  listMaxBytes: number;
  /** SERVICE_SKILL_MAX_VERSIONS: the newest versions kept per skill, besides those retained runs used. */
  maxVersions: number;
}

/** How long a run waits for retention to decide about a version it pins, before write_conflict. */
const RETIRING_WAIT_MS = 2000;
const RETIRING_POLL_MS = 25;

/**
 * The workspace skill registry: binds names to validated bundles, keeping each binding as an
 * immutable version. Validation happens before any write, so a refused bundle changes nothing.
 *
 * Invariants, each kept by conditional batches (so across replicas, not by the in-process lock,
 * which only saves this process's puts of one name from validating in parallel to conflict):
 * - the current version is the newest, and the record's hash is its hash;
 * - a version exists only while the workspace's asset of its hash does (bound in one batch with
 *   a condition on the asset; the last version bound to a hash releases the asset in its batch);
 * - retention removes a version only after marking it retiring and finding no run that used it;
 *   a run records its use in a batch conditional on the version not being marked, so either the
 *   retention sees the use or the run waits for the retention's decision.
 */
export class SkillRegistry {
  readonly #store: Store;
  readonly #records: SkillRecords;
  readonly #versions: SkillVersions;
  readonly #assets: Assets;
  readonly #bundles: StoredBundles;
  readonly #lock = new KeyedLock();
  readonly #settings: RegistrySettings;

  constructor(store: Store, records: SkillRecords, versions: SkillVersions, assets: Assets, bundles: StoredBundles, settings: RegistrySettings) {
    this.#store = store;
    this.#records = records;
    this.#versions = versions;
    this.#assets = assets;
    this.#bundles = bundles;
    this.#settings = settings;
  }

  async put(workspace: string, name: string, contentHash: string): Promise<PutResult> {
    checkName(name);
    checkSha256(contentHash);
    return this.#lock.run(`${workspace}/${name}`, async () => {
      // Validated once, before the conditional update (which may run again), unless it is a no-op.
      const current = await this.#records.get(workspace, name);
      let validated = current?.contentHash === contentHash ? undefined : await this.#validated(workspace, contentHash);
      const result = await this.#records.update(workspace, name, async (existing, reads) => {
        if (existing?.contentHash === contentHash) return { result: { record: existing, changed: false } };
        validated ??= await this.#validated(workspace, contentHash);
        const { asset, bundle } = validated;
        if (!(await this.#assets.finalizedIn(reads, workspace, contentHash))) throw assetGone(contentHash);
        const summary = { description: bundle.description, bundleBytes: asset.sizeBytes, fileCount: bundle.fileCount, totalFileBytes: bundle.totalBytes };
        return this.#newVersion(reads, workspace, name, existing, { contentHash, ...summary }, bundle.listing);
      });
      if (result.changed) await this.#retain(workspace, name);
      return result;
    });
  }

  /**
   * Makes the name resolve to an earlier version's content again, recorded as a new version
   * (restoredFrom); a no-op when the skill has that content already.
   */
  async rollback(workspace: string, name: string, version: number): Promise<RollbackResult> {
    checkName(name);
    checkVersion(version);
    return this.#lock.run(`${workspace}/${name}`, async () => {
      const result = await this.#records.update(workspace, name, async (existing, reads) => {
        if (!existing) throw notFound(name);
        const target = await this.#versions.getIn(reads, workspace, name, version);
        if (!target) throw versionNotFound(name, version);
        if (target.contentHash === existing.contentHash) return { result: { record: existing, changed: false } };
        if (!(await this.#assets.finalizedIn(reads, workspace, target.contentHash))) throw assetGone(target.contentHash);
        const files = (await this.#versions.files(workspace, name, version)) ?? [];
        const { contentHash, description, bundleBytes, fileCount, totalFileBytes } = target;
        return this.#newVersion(reads, workspace, name, existing, { contentHash, description, bundleBytes, fileCount, totalFileBytes }, files, version);
      });
      if (result.changed) await this.#retain(workspace, name);
      return { ...result, version: await this.version(workspace, name, result.record.version ?? 0) };
    });
  }

  async get(workspace: string, name: string): Promise<SkillRecord> {
    checkName(name);
    const record = await this.#records.get(workspace, name);
    if (!record) throw notFound(name);
    return record;
  }

  /** Removes the skill, then its versions (and what only they held). */
  async delete(workspace: string, name: string): Promise<void> {
    checkName(name);
    await this.#lock.run(`${workspace}/${name}`, async () => {
      const removed = await this.#records.delete(workspace, name);
      if (!removed) throw notFound(name);
      // Versions above the removed record's are a new skill of the same name, put meanwhile through another replica.
      for (const version of await this.#versions.all(workspace, name)) {
        if (version.version <= (removed.version ?? 0)) await this.#removeVersion(workspace, name, version.version, { current: "allowed" });
      }
    });
  }

  /** A page of skills in name order. */
  list(workspace: string, request: PageRequest): Promise<Page<SkillRecord>> {
    return this.#records.page(workspace, request, this.#settings.listMaxBytes);
  }

  /** The skill's metadata with every file's path and size (never the bytes). */
  async listing(workspace: string, name: string): Promise<SkillRecord & { files: BundleFile[] }> {
    const record = await this.get(workspace, name);
    const files = record.files ?? (await this.#records.files(workspace, name));
    if (files) return { ...record, files };
    return { ...record, files: (await this.#bundles.inspect(await this.#bundleOf(workspace, record.name, record.contentHash))).listing };
  }

  /** The current content of the skill, read from its bundle (checked as any bundle is): the MCP endpoint serves it. */
  async content(workspace: string, name: string): Promise<SkillContent> {
    const record = await this.get(workspace, name);
    const bundle = await this.#bundles.files(await this.#bundleOf(workspace, name, record.contentHash));
    return { record, files: bundle.files, frontmatter: bundle.frontmatter ?? {} };
  }

  /** A page of the skill's versions, newest first, and the skill (to say which is current). */
  async versions(workspace: string, name: string, request: PageRequest): Promise<{ skill: SkillRecord; page: Page<SkillVersionRecord> }> {
    const skill = await this.get(workspace, name);
    return { skill, page: await this.#versions.page(workspace, name, request, this.#settings.listMaxBytes) };
  }

  /** A bundle's files from its bytes (a run's snapshot, read back when the run resumes), checked as any bundle is. */
  async bundleFiles(bytes: Uint8Array): Promise<Map<string, Uint8Array>> {
    return (await this.#bundles.filesOf(bytes)).files;
  }

  async version(workspace: string, name: string, version: number): Promise<SkillVersionRecord> {
    checkName(name);
    checkVersion(version);
    const record = await this.#versions.get(workspace, name, version);
    if (!record) throw versionNotFound(name, version);
    return record;
  }

  /** One version's metadata, its file listing, and whether it is current. */
  async versionListing(workspace: string, name: string, version: number): Promise<{ version: SkillVersionRecord; files: BundleFile[]; current: boolean }> {
    const record = await this.version(workspace, name, version);
    const files = (await this.#versions.files(workspace, name, version)) ?? [];
    return { version: record, files, current: (await this.#records.get(workspace, name))?.version === version };
  }

  /** A version's SKILL.md text (the one read of a file's content the API offers: docs/api.md). */
  async instructions(workspace: string, name: string, version: number): Promise<string> {
    const record = await this.version(workspace, name, version);
    const bundle = await this.#bundles.files(await this.#bundleOf(workspace, name, record.contentHash));
    return new TextDecoder().decode(bundle.files.get("SKILL.md"));
  }

  /** Removes a version that is not the current one. */
  async deleteVersion(workspace: string, name: string, version: number): Promise<void> {
    await this.version(workspace, name, version);
    if (!(await this.#removeVersion(workspace, name, version, { current: "refused" }))) throw versionNotFound(name, version);
  }

  /**
   * Resolves a run's reference (SPEC 3.8): the pinned version, else the current one, with its
   * files; records that the run used it, so that retention keeps it while the run is retained.
   * Server-internal, never on the wire.
   */
  async resolve(workspace: string, name: string, pinned: number | undefined, runId: string): Promise<ResolvedSkill> {
    checkName(name);
    if (pinned !== undefined) checkVersion(pinned);
    const deadline = Date.now() + RETIRING_WAIT_MS;
    for (;;) {
      const current = pinned === undefined ? await this.get(workspace, name) : undefined;
      // Written by a replica that kept no versions (an upgrade under way): the content, as version 0.
      if (current && current.version === undefined) return this.#unversioned(workspace, current);
      const version = pinned ?? current!.version!;
      const used = await readModifyWrite(this.#store, async (reads) => {
        const record = await this.#versions.getIn(reads, workspace, name, version);
        if (!record || record.retiring) return { ops: [], result: record };
        return { ops: [this.#versions.useOp(workspace, name, version, runId)], result: record };
      });
      if (!used) {
        // The current version moved on meanwhile: resolve the name again.
        if (pinned === undefined && Date.now() < deadline) continue;
        throw versionNotFound(name, version);
      }
      if (!used.retiring) {
        const bundle = await this.#bundles.files(await this.#bundleOf(workspace, name, used.contentHash));
        return { version: used, files: bundle.files };
      }
      if (Date.now() > deadline) throw new WriteConflict(`version ${version} of skill ${name} is being retired`);
      await sleep(RETIRING_POLL_MS);
    }
  }

  /** Forgets a run's uses of versions (the run is gone), and lets retention drop what only it kept. */
  async forgetRun(workspace: string, runId: string, uses: ReadonlyArray<{ name: string; version: number }>): Promise<void> {
    for (const { name, version } of uses) {
      if (version === 0) continue;
      await this.#versions.forgetRun(workspace, name, version, runId);
      await this.#lock.run(`${workspace}/${name}`, () => this.#retain(workspace, name));
    }
  }

  /**
   * Gives every skill record last written before versions were kept its version 1 (the content
   * it has), so that every binding of a hash is known. Safe to run on several replicas at once.
   */
  async migrate(): Promise<number> {
    if (await this.#records.migrated()) return 0;
    let migrated = 0;
    for await (const { workspace, record } of this.#records.unversioned()) {
      const files = record.files ?? (await this.#records.files(workspace, record.name)) ?? [];
      const changed = await this.#records.update(workspace, record.name, async (existing, reads) => {
        if (!existing || existing.version !== undefined) return { result: false };
        const { contentHash, description, bundleBytes, fileCount, totalFileBytes } = existing;
        const version: SkillVersionRecord = {
          name: existing.name,
          version: 1,
          contentHash,
          description,
          bundleBytes,
          fileCount,
          totalFileBytes,
          createdAt: existing.updatedAt,
        };
        return { record: { ...existing, version: 1 }, files, ops: await this.#versions.createOps(reads, workspace, version, files), result: true };
      });
      if (changed) migrated++;
    }
    // Replicas of an older version may still write records without versions while an upgrade
    // rolls out; resolve() serves those as version 0, and their next PutSkill numbers on from 1.
    await this.#records.markMigrated();
    return migrated;
  }

  async #unversioned(workspace: string, record: SkillRecord): Promise<ResolvedSkill> {
    const { name, contentHash, description, bundleBytes, fileCount, totalFileBytes, updatedAt } = record;
    const bundle = await this.#bundles.files(await this.#bundleOf(workspace, name, contentHash));
    return { version: { name, version: 0, contentHash, description, bundleBytes, fileCount, totalFileBytes, createdAt: updatedAt }, files: bundle.files };
  }

  /** The finalized asset of the hash and its bundle, validated: before anything is written. */
  async #validated(workspace: string, contentHash: string): Promise<{ asset: AssetRecord; bundle: BundleSummary }> {
    const asset = await this.#assets.finalized(workspace, contentHash);
    if (!asset) throw serviceError("asset_not_found", `no finalized asset ${contentHash} in this workspace; upload the bundle first`);
    return { asset, bundle: await this.#bundles.inspect(asset) };
  }

  /** The update that makes `content` the skill's new current version. */
  async #newVersion(
    reads: ConditionalReads,
    workspace: string,
    name: string,
    existing: SkillRecord | undefined,
    content: Pick<SkillRecord, "contentHash" | "description" | "bundleBytes" | "fileCount" | "totalFileBytes">,
    files: BundleFile[],
    restoredFrom?: number,
  ) {
    const now = new Date().toISOString();
    // A new skill of a name numbers on after versions a deletion interrupted by a crash left.
    const number = Math.max(existing?.version ?? 0, existing ? 0 : await this.#versions.highest(workspace, name)) + 1;
    const record: SkillRecord = { name, ...content, createdAt: existing?.createdAt ?? now, updatedAt: now, version: number };
    const version: SkillVersionRecord = { name, version: number, ...content, createdAt: now, ...(restoredFrom ? { restoredFrom } : {}) };
    return { record, files, ops: await this.#versions.createOps(reads, workspace, version, files), result: { record, changed: true } };
  }

  /**
   * SERVICE_SKILL_MAX_VERSIONS: the newest versions stay, the current one among them, and so does
   * any version a run still retained used; the others go. Called after each new version and
   * each removed run, under the name's lock.
   */
  async #retain(workspace: string, name: string): Promise<void> {
    const skill = await this.#records.get(workspace, name);
    if (!skill) return;
    const versions = await this.#versions.all(workspace, name);
    for (const version of versions.slice(0, Math.max(0, versions.length - this.#settings.maxVersions))) {
      if (version.version !== skill.version) await this.#retire(workspace, version);
    }
  }

  /** Marks the version retiring, then removes it unless a run used it (then the mark is taken back). */
  async #retire(workspace: string, version: SkillVersionRecord): Promise<void> {
    const { name } = version;
    const marked = await readModifyWrite(this.#store, async (reads) => {
      const record = await this.#versions.getIn(reads, workspace, name, version.version);
      return { ops: record && !record.retiring ? [this.#versions.markOp(workspace, record, true)] : [], result: record !== undefined };
    });
    if (!marked) return;
    // Read after the mark is durable: a run that recorded its use before is seen; one after waits.
    if (await this.#versions.usedByRuns(workspace, name, version.version)) {
      await readModifyWrite(this.#store, async (reads) => {
        const record = await this.#versions.getIn(reads, workspace, name, version.version);
        return { ops: record?.retiring ? [this.#versions.markOp(workspace, record, false)] : [], result: undefined };
      });
      return;
    }
    await this.#removeVersion(workspace, name, version.version, { current: "refused" });
  }

  /**
   * Removes a version, its listing and its binding; the last version of the workspace bound to a
   * hash releases the workspace's asset, and the bytes are collected when nobody holds them.
   * False when the version was gone already.
   */
  async #removeVersion(workspace: string, name: string, number: number, options: { current: "refused" | "allowed" }): Promise<boolean> {
    const outcome = await readModifyWrite(this.#store, async (reads) => {
      const version = await this.#versions.getIn(reads, workspace, name, number);
      if (!version) return { ops: [], result: undefined };
      if (options.current === "refused" && (await this.#records.getIn(reads, workspace, name))?.version === number) {
        throw serviceError("skill_version_current", `version ${number} is the current version of skill ${name}; bind or roll back to another first`);
      }
      const { ops, unbound } = await this.#versions.removeOps(reads, workspace, version);
      const released = unbound ? await this.#assets.releaseOps(reads, workspace, version.contentHash) : { ops: [], collect: false };
      return { ops: [...ops, ...released.ops], result: { collect: released.collect, contentHash: version.contentHash } };
    });
    if (!outcome) return false;
    await this.#versions.forgetVersion(workspace, name, number);
    if (outcome.collect) await this.#assets.collect(outcome.contentHash);
    return true;
  }

  /** The finalized asset holding a bundle. */
  async #bundleOf(workspace: string, name: string, contentHash: string): Promise<AssetRecord> {
    const asset = await this.#assets.finalized(workspace, contentHash);
    if (!asset) throw serviceError("asset_not_found", `the bundle of skill ${name} is no longer available`);
    return asset;
  }
}

function checkName(name: string): void {
  const problem = validateSkillName(name);
  if (problem) throw serviceError("invalid_skill_name", problem);
}

function checkVersion(version: number): void {
  if (!Number.isInteger(version) || version < 1) throw serviceError("invalid_argument", "version must be a positive integer");
}

function notFound(name: string) {
  return serviceError("skill_not_found", `this workspace has no skill named ${JSON.stringify(name)}`);
}

function versionNotFound(name: string, version: number) {
  return serviceError("skill_version_not_found", `skill ${name} has no version ${version}`);
}

function assetGone(contentHash: string) {
  return serviceError("asset_not_found", `no finalized asset ${contentHash} in this workspace; upload the bundle again`);
}
