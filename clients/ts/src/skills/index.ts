export { Skill, type FileContents, type FromUrlOptions, type SkillBundle } from "./skill.ts";
export {
  createSkillsClient,
  type RollbackResult,
  type SkillDetails,
  type SkillFileInfo,
  type SkillsClient,
  type SkillVersionDetails,
  type UploadedSkill,
} from "./skills-client.ts";
export { SkillSourceError } from "./skill-source-error.ts";
