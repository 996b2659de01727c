import type { Client } from "@connectrpc/connect";
import type { Skill as SkillMetadata, SkillService } from "../../gen/skillenv/skills/v1/skills_pb.js";
import type { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { uploadAsset, type FetchFunction } from "../assets.ts";
import { assertWithinLimits, type BundleLimits } from "../bundle/index.ts";
import { oncePerInstance } from "../once-per-instance.ts";
import type { Skill } from "./skill.ts";
import { mapBounded } from "../map-bounded.ts";

/** A skill's metadata with its files' paths and sizes. */
export type SkillDetails = SkillMetadata & { files: Array<{ path: string; sizeBytes: number }> };

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
  /** The skill's metadata and the paths and sizes of its files (never the bytes). */
  get(name: string): Promise<SkillDetails>;
  delete(name: string): Promise<void>;
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
    async get(name) {
      const response = await skills.getSkill({ name });
      if (!response.skill) throw new Error("GetSkill answered without the skill");
      return { ...response.skill, files: response.files.map(({ path, sizeBytes }) => ({ path, sizeBytes: Number(sizeBytes) })) };
    },
    async delete(name) {
      await skills.deleteSkill({ name });
    },
  };
  return client;
}
