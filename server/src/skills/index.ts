import type { ServiceImpl } from "@connectrpc/connect";
import type { SkillService } from "../../../gen/skillenv/skills/v1/skills_pb.js";
import type { Assets } from "../assets/index.ts";
import type { Store } from "../storage/index.ts";
import type { Limits } from "../config/index.ts";
import { bundleLimitsFrom } from "./bundle/index.ts";
import { SkillRegistry } from "./registry.ts";
import { SkillRecords } from "./skill-records.ts";
import { SkillVersions } from "./skill-versions.ts";
import { createSkillService } from "./skill-service.ts";
import { StoredBundles, type RangedBlobs } from "./stored-bundles.ts";

export { SkillService } from "../../../gen/skillenv/skills/v1/skills_pb.js";
export type { ResolvedSkill, SkillContent, SkillRegistry } from "./registry.ts";
export type { SkillRecord } from "./skill-records.ts";
export type { SkillVersionRecord } from "./skill-versions.ts";

export interface Skills {
  service: ServiceImpl<typeof SkillService>;
  /** Server-internal API (staging, the skills meta-tool). */
  registry: SkillRegistry;
  /** Gives skills last bound before versions were kept their version 1; call before serving. */
  migrate(): Promise<number>;
  /** Stops the SKILL.md parser threads; reads still running are refused with unavailable. */
  close(): Promise<void>;
}

export function createSkills(store: Store, assets: Assets, blobs: RangedBlobs, limits: Limits): Skills {
  const bundles = new StoredBundles(blobs, bundleLimitsFrom(limits), limits.skillMaxConcurrentValidations);
  const registry = new SkillRegistry(store, new SkillRecords(store), new SkillVersions(store), assets, bundles, {
    listMaxBytes: limits.listMaxBytes,
    maxVersions: limits.skillMaxVersions,
  });
  return { service: createSkillService(registry), registry, migrate: () => registry.migrate(), close: () => bundles.close() };
}
