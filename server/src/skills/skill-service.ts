import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SkillSchema, SkillVersionSchema, type Skill, type SkillService, type SkillVersion } from "../../../gen/skillenv/skills/v1/skills_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import type { BundleFile } from "./bundle/index.ts";
import type { SkillRegistry } from "./registry.ts";
import type { SkillRecord } from "./skill-records.ts";
import type { SkillVersionRecord } from "./skill-versions.ts";

/** The SkillService RPCs: thin adapters from messages to the registry. */
export function createSkillService(registry: SkillRegistry): ServiceImpl<typeof SkillService> {
  return {
    async putSkill(request, context: HandlerContext) {
      const { record, changed } = await registry.put(requireWorkspace(context), request.name, request.contentHash);
      return { skill: skillMessage(record), changed };
    },
    async getSkill(request, context: HandlerContext) {
      const record = await registry.listing(requireWorkspace(context), request.name);
      return { skill: skillMessage(record), files: fileMessages(record.files) };
    },
    async listSkills(request, context: HandlerContext) {
      const page = await registry.list(requireWorkspace(context), request);
      return { skills: page.items.map(skillMessage), nextPageToken: page.nextPageToken };
    },
    async deleteSkill(request, context: HandlerContext) {
      await registry.delete(requireWorkspace(context), request.name);
      return {};
    },
    async listSkillVersions(request, context: HandlerContext) {
      const { skill, page } = await registry.versions(requireWorkspace(context), request.name, request);
      return { versions: page.items.map((version) => versionMessage(version, version.version === skill.version)), nextPageToken: page.nextPageToken };
    },
    async getSkillVersion(request, context: HandlerContext) {
      const { version, files, current } = await registry.versionListing(requireWorkspace(context), request.name, request.version);
      return { version: versionMessage(version, current), files: fileMessages(files) };
    },
    async deleteSkillVersion(request, context: HandlerContext) {
      await registry.deleteVersion(requireWorkspace(context), request.name, request.version);
      return {};
    },
    async getSkillInstructions(request, context: HandlerContext) {
      return { skillMd: await registry.instructions(requireWorkspace(context), request.name, request.version) };
    },
    async rollbackSkill(request, context: HandlerContext) {
      const { record, version, changed } = await registry.rollback(requireWorkspace(context), request.name, request.version);
      return { skill: skillMessage(record), version: versionMessage(version, true), changed };
    },
  };
}

function skillMessage(record: SkillRecord): Skill {
  return create(SkillSchema, {
    name: record.name,
    description: record.description,
    contentHash: record.contentHash,
    bundleBytes: BigInt(record.bundleBytes),
    fileCount: record.fileCount,
    totalFileBytes: BigInt(record.totalFileBytes),
    createdAt: timestampFromMs(Date.parse(record.createdAt)),
    updatedAt: timestampFromMs(Date.parse(record.updatedAt)),
    version: record.version ?? 0,
  });
}

function versionMessage(record: SkillVersionRecord, current: boolean): SkillVersion {
  return create(SkillVersionSchema, {
    name: record.name,
    version: record.version,
    contentHash: record.contentHash,
    description: record.description,
    bundleBytes: BigInt(record.bundleBytes),
    fileCount: record.fileCount,
    totalFileBytes: BigInt(record.totalFileBytes),
    createdAt: timestampFromMs(Date.parse(record.createdAt)),
    restoredFrom: record.restoredFrom ?? 0,
    current,
  });
}

function fileMessages(files: BundleFile[]) {
  return files.map(({ path, sizeBytes, crc32 }) => ({ path, sizeBytes: BigInt(sizeBytes), crc32: crc32 ?? 0 }));
}
