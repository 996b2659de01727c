import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  ErrorCode,
  ListResourcesRequestSchema,
  McpError,
  ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema,
  type JSONRPCRequest,
  type ReadResourceResult,
  type Resource,
} from "@modelcontextprotocol/sdk/types.js";
import type { SkillRegistry } from "../skills/index.ts";
import { asMcpError, invalidParams } from "./mcp-errors.ts";
import { SERVER_INFO } from "./server-info.ts";
import type { SkillEntries, SkillEntry } from "./skill-entries.ts";
import { mimeTypeOf, parseSkillFileUri, SKILL_MD, skillFileUri } from "./skill-uris.ts";

export const SKILLS_EXTENSION = "io.modelcontextprotocol/skills";

/** Skills a page of skills/list and resources/list holds: each entry reads its skill's bundle once. */
const SKILLS_PER_PAGE = 20;

/**
 * How long a client may hold a listing or an entry before asking again (the extension's
 * CacheableResult hints, which its base revision 2026-07-28 makes required and 2025-11-25 ignores):
 * skills are mutable by name (SPEC 3.7), so a short while; the digests say when content changed.
 */
const CACHE_HINTS = { ttlMs: 60_000, cacheScope: "private" } as const;

export interface SkillsServerOptions {
  workspace: string;
  registry: SkillRegistry;
  entries: SkillEntries;
}

/**
 * The workspace's skills over MCP, through the skills extension (`io.modelcontextprotocol/skills`):
 * `skills/list` and `skills/get` answer entries with every file's SHA-256 digest and size, and
 * every file of every skill is a resource (`skill://<name>/<path>`) that `resources/read`
 * answers with exactly the bytes the digest covers. One server per request (the endpoint is
 * stateless), so everything it answers is read for this workspace, then.
 */
export function skillsServer({ workspace, registry, entries }: SkillsServerOptions): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { resources: {}, extensions: { [SKILLS_EXTENSION]: {} } },
    instructions:
      "This server serves the skills of one workspace of the skillenv service through the MCP skills extension (skills/list, skills/get); every file of a skill is a resource skill://<name>/<path>.",
  });

  // The extension's methods are not the SDK's, so they arrive at the fallback handler.
  server.fallbackRequestHandler = async (request: JSONRPCRequest) => {
    try {
      switch (request.method) {
        case "skills/list":
          return await listSkills(cursorOf(request.params));
        case "skills/get":
          return await getSkill(request.params);
        default:
          throw new McpError(ErrorCode.MethodNotFound, `Method not found: ${request.method}`);
      }
    } catch (error) {
      throw asMcpError(error);
    }
  };

  server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
    try {
      const page = await registry.list(workspace, { pageSize: SKILLS_PER_PAGE, pageToken: request.params?.cursor ?? "" });
      const resources: Resource[] = [];
      for (const skill of page.items) {
        const { files } = await registry.listing(workspace, skill.name);
        for (const file of files) {
          const isSkillMd = file.path === SKILL_MD;
          resources.push({
            uri: skillFileUri(skill.name, file.path),
            name: isSkillMd ? skill.name : file.path,
            ...(isSkillMd ? { description: skill.description, mimeType: "text/markdown" } : { mimeType: mimeTypeOf(file.path) }),
            size: file.sizeBytes,
          });
        }
      }
      return { resources, ...(page.nextPageToken ? { nextCursor: page.nextPageToken } : {}) };
    } catch (error) {
      throw asMcpError(error);
    }
  });

  // No templates: every file is listed and addressable by its own URI.
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [] }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      return await readFile(request.params.uri);
    } catch (error) {
      throw asMcpError(error);
    }
  });

  async function listSkills(cursor: string): Promise<Record<string, unknown>> {
    const page = await registry.list(workspace, { pageSize: SKILLS_PER_PAGE, pageToken: cursor });
    const skills: SkillEntry[] = [];
    for (const skill of page.items) skills.push(await entries.entry(workspace, skill.name));
    return { resultType: "complete", skills, ...(page.nextPageToken ? { nextCursor: page.nextPageToken } : {}), ...CACHE_HINTS };
  }

  async function getSkill(params: unknown): Promise<Record<string, unknown>> {
    const uri = (params as { uri?: unknown } | undefined)?.uri;
    if (typeof uri !== "string") throw invalidParams("skills/get needs params.uri, the URI of a skill's SKILL.md");
    const file = parseSkillFileUri(uri);
    if (!file || file.path !== SKILL_MD) throw invalidParams(`no skill is served at ${uri}: a skill's URI is skill://<name>/SKILL.md`);
    return { resultType: "complete", skill: await entries.entry(workspace, file.name), ...CACHE_HINTS };
  }

  async function readFile(uri: string): Promise<ReadResourceResult> {
    const file = parseSkillFileUri(uri);
    if (!file) throw invalidParams(`no resource is served at ${uri}`);
    const content = await registry.content(workspace, file.name);
    const bytes = content.files.get(file.path);
    if (!bytes) throw invalidParams(`skill ${file.name} has no file ${JSON.stringify(file.path)}`);
    const mimeType = file.path === SKILL_MD ? "text/markdown" : mimeTypeOf(file.path);
    const text = utf8(bytes);
    // Text only when its UTF-8 encoding gives back exactly these bytes, so the digest holds either way.
    const body = text === undefined ? { blob: Buffer.from(bytes).toString("base64") } : { text };
    return { contents: [{ uri: skillFileUri(file.name, file.path), mimeType, ...body }], ...CACHE_HINTS };
  }

  return server;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The bytes as text when they are valid UTF-8 (a byte-order mark kept as a character), else undefined. */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function cursorOf(params: unknown): string {
  const cursor = (params as { cursor?: unknown } | undefined)?.cursor;
  if (cursor === undefined) return "";
  if (typeof cursor !== "string") throw invalidParams("cursor must be a string");
  return cursor;
}
