// A worker thread that parses SKILL.md: UTF-8 decoding, the frontmatter bounds, YAML. Within the
// bounds a parse still costs up to about a tenth of a second, which the main thread must not spend.
import { parentPort } from "node:worker_threads";
import { BundleFormatError, decodeSkillMd, parseSkillMd } from "@skillenv/client/bundle";
import type { SkillMdFields } from "./read.ts";
import { skillMdFields } from "./skill-md-fields.ts";

export type ParseReply = { ok: true; fields: SkillMdFields } | { ok: false; code?: BundleFormatError["code"]; message: string };

const port = parentPort;
if (!port) throw new Error("skill-md-worker.ts must run as a worker thread");

port.on("message", (bytes: Uint8Array) => port.postMessage(parse(bytes)));

function parse(bytes: Uint8Array): ParseReply {
  try {
    return { ok: true, fields: skillMdFields(parseSkillMd(decodeSkillMd(bytes))) };
  } catch (error) {
    if (error instanceof BundleFormatError) return { ok: false, code: error.code, message: error.message };
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}
