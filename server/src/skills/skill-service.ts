import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SkillSchema, type Skill, type SkillService } from "../../../gen/skillenv/skills/v1/skills_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import type { SkillRegistry } from "./registry.ts";
import type { SkillRecord } from "./skill-records.ts";

/** The SkillService RPCs: thin adapters from messages to the registry. */
export function createSkillService(registry: SkillRegistry): ServiceImpl<typeof SkillService> {
  return {
    async putSkill(request, context: HandlerContext) {
      const { record, changed } = await registry.put(requireWorkspace(context), request.name, request.contentHash);
      return { skill: skillMessage(record), changed };
    },
    async getSkill(request, context: HandlerContext) {
      const record = await registry.listing(requireWorkspace(context), request.name);
      return { skill: skillMessage(record), files: record.files.map(({ path, sizeBytes }) => ({ path, sizeBytes: BigInt(sizeBytes) })) };
    },
    async listSkills(request, context: HandlerContext) {
      const page = await registry.list(requireWorkspace(context), request);
      return { skills: page.items.map(skillMessage), nextPageToken: page.nextPageToken };
    },
    async deleteSkill(request, context: HandlerContext) {
      await registry.delete(requireWorkspace(context), request.name);
      return {};
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
  });
}
