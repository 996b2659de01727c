import type { Client } from "@connectrpc/connect";
import type { Skill as SkillMetadata, SkillService, SkillVersion } from "../../gen/skillenv/skills/v1/skills_pb.js";
import type { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { uploadAsset, type FetchFunction } from "../assets.ts";
import { assertWithinLimits, type BundleLimits } from "../bundle/index.ts";
import { oncePerInstance } from "../once-per-instance.ts";
import type { Skill } from "./skill.ts";
import { mapBounded } from "../map-bounded.ts";

/** A file of a skill's bundle: its path, size and CRC-32 (0 when the server did not keep it), never its bytes. */
export interface SkillFileInfo {
  path: string;
  sizeBytes: number;
  crc32: number;
}

/** A skill's metadata with its files' paths and sizes. */
export type SkillDetails = SkillMetadata & { files: SkillFileInfo[] };

/** One version's metadata with its files' paths and sizes. */
export type SkillVersionDetails = SkillVersion & { files: SkillFileInfo[] };

/** What a rollback did: the skill and its new current version (or the current one, when `changed` is false). */
export interface RollbackResult {
  skill: SkillMetadata;
  version: SkillVersion;
  changed: boolean;
}

export interface UploadedSkill {
  name: string;
  contentHash: string;
  /** Bundle bytes sent to the object store; 0 on a dedup hit. */
  bytesSent: number;
  /** False when the name was already bound to these bytes. */
  changed: boolean;
  metadata: SkillMetadata;
}

export interface SkillsClient {
  /**
   * presign -> PUT (skipped on a dedup hit) -> finalize -> PUT /skills/{name}; once per skill
   * instance. A bundle breaking the bundle limits is refused before anything is sent.
   */
  upload(skill: Skill): Promise<UploadedSkill>;
  /** Uploads several skills, at most `concurrency` (default 4) at a time. */
  uploadAll(skills: readonly Skill[], options?: { concurrency?: number }): Promise<UploadedSkill[]>;
  list(options?: { pageSize?: number; pageToken?: string }): Promise<{ skills: SkillMetadata[]; nextPageToken: string }>;
  /** The skill's metadata and the paths and sizes of its files (never the bytes); with `version`, that version's. */
  get(name: string): Promise<SkillDetails>;
  get(name: string, options: { version: number }): Promise<SkillVersionDetails>;
  delete(name: string): Promise<void>;
  /** A page of the skill's versions, newest first (metadata only). */
  versions(name: string, options?: { pageSize?: number; pageToken?: string }): Promise<{ versions: SkillVersion[]; nextPageToken: string }>;
  /** Makes the name resolve to an earlier version's content again, recorded as a new version. */
  rollback(name: string, version: number): Promise<RollbackResult>;
  /** Removes a version that is not the current one. */
  deleteVersion(name: string, version: number): Promise<void>;
  /** The text of one version's SKILL.md (the one file content the API offers). */
  instructions(name: string, version: number): Promise<string>;
}

/**
 * Upload results are cached per (skill instance, client): repeated or concurrent uploads of one
 * instance cost one set of round trips, and a later use of the instance needs none.
 */
export function createSkillsClient(
  skills: Client<typeof SkillService>,
  assets: Client<typeof AssetService>,
  fetchFn: FetchFunction,
  limits: BundleLimits,
): SkillsClient {
  async function uploadOnce(skill: Skill): Promise<UploadedSkill> {
    const bundle = await skill.bundle();
    assertWithinLimits(bundle.fileSizes, limits);
    const asset = await uploadAsset(assets, bundle.zip, fetchFn, bundle.contentHash);
    const response = await skills.putSkill({ name: bundle.name, contentHash: bundle.contentHash });
    if (!response.skill) throw new Error("PutSkill answered without the skill");
    return {
      name: bundle.name,
      contentHash: bundle.contentHash,
      bytesSent: asset.uploaded ? asset.sizeBytes : 0,
      changed: response.changed ?? true,
      metadata: response.skill,
    };
  }

  const client: SkillsClient = {
    upload: oncePerInstance(uploadOnce),
    async uploadAll(list, options = {}) {
      return mapBounded(list, options.concurrency ?? 4, (skill) => client.upload(skill));
    },
    async list(options = {}) {
      const page = await skills.listSkills({ pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" });
      return { skills: page.skills, nextPageToken: page.nextPageToken };
    },
    get: (async (name: string, options?: { version: number }) => {
      if (options?.version !== undefined) {
        const response = await skills.getSkillVersion({ name, version: options.version });
        if (!response.version) throw new Error("GetSkillVersion answered without the version");
        return { ...response.version, files: fileSizes(response.files) };
      }
      const response = await skills.getSkill({ name });
      if (!response.skill) throw new Error("GetSkill answered without the skill");
      return { ...response.skill, files: fileSizes(response.files) };
    }) as SkillsClient["get"],
    async delete(name) {
      await skills.deleteSkill({ name });
    },
    async versions(name, options = {}) {
      const page = await skills.listSkillVersions({ name, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" });
      return { versions: page.versions, nextPageToken: page.nextPageToken };
    },
    async rollback(name, version) {
      const response = await skills.rollbackSkill({ name, version });
      if (!response.skill || !response.version) throw new Error("RollbackSkill answered without the skill or its version");
      return { skill: response.skill, version: response.version, changed: response.changed ?? true };
    },
    async deleteVersion(name, version) {
      await skills.deleteSkillVersion({ name, version });
    },
    async instructions(name, version) {
      return (await skills.getSkillInstructions({ name, version })).skillMd;
    },
  };
  return client;
}

function fileSizes(files: ReadonlyArray<{ path: string; sizeBytes: bigint; crc32: number }>): SkillFileInfo[] {
  return files.map(({ path, sizeBytes, crc32 }) => ({ path, sizeBytes: Number(sizeBytes), crc32 }));
}
