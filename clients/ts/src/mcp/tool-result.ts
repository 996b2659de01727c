/** One content block of an MCP tool result (2025-11-25 schema: text, image, audio, resource_link, resource). */
export interface ContentBlock {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
  uri?: string;
  name?: string;
  title?: string;
  description?: string;
  resource?: { uri?: string; mimeType?: string; text?: string; blob?: string };
}

/** A tools/call result, as much of it as the service reads. */
export interface CallToolResult {
  content?: ContentBlock[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** An image a tool result shows a model: its media type and its bytes in base64. */
export interface ToolImage {
  mimeType: string;
  data: string;
}

/** The media types models take as images in a tool result (Anthropic's four; OpenAI's too). */
export const TOOL_IMAGE_TYPES: ReadonlySet<string> = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
/**
 * The base64 characters of images one result may carry, all together (192 KiB of image bytes):
 * they are kept in the journal with the receipt, well within its default 1 MiB a payload.
 */
export const MAX_TOOL_IMAGE_CHARS = 256 * 1024;

/**
 * The text a model reads for a tool result's content: text blocks as they are; every other block
 * described in one bracketed line (what it is, its media type and size, its URI). Images in
 * `attached` travel beside the text (see outputValue) and are described as attached; any other
 * binary data is described only: it never reaches the journal.
 */
export function describeContent(content: readonly ContentBlock[], attached: ReadonlySet<ContentBlock> = new Set()): string {
  return content.map((block) => describeBlock(block, attached.has(block))).join("\n");
}

/**
 * A returned receipt's output: `{"content": <text>}`, with the server's `structuredContent`
 * beside it when it gave one (JSON the model and callers can read as is), and `images`, the
 * result's images of the types models take, in order, while they fit MAX_TOOL_IMAGE_CHARS
 * together: a run shows them to a model that takes images in tool results (docs/mcp.md).
 */
export function outputOf(result: CallToolResult): string {
  return JSON.stringify(outputValue(result));
}

/** The same output as a value (what a host returns). */
export function outputValue(result: CallToolResult): { content: string; structuredContent?: Record<string, unknown>; images?: ToolImage[] } {
  const blocks = result.content ?? [];
  const attached = attachedImages(blocks);
  const content = describeContent(blocks, attached);
  const images = [...attached].map((block) => ({ mimeType: block.mimeType!, data: block.data! }));
  return {
    content,
    ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
    ...(images.length > 0 ? { images } : {}),
  };
}

/** Whether `value` is a ToolImage a model can be shown. */
export function isToolImage(value: unknown): value is ToolImage {
  const { mimeType, data } = (typeof value === "object" && value !== null ? value : {}) as Partial<Record<keyof ToolImage, unknown>>;
  return typeof mimeType === "string" && TOOL_IMAGE_TYPES.has(mimeType) && typeof data === "string" && BASE64.test(data);
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function attachedImages(blocks: readonly ContentBlock[]): Set<ContentBlock> {
  const attached = new Set<ContentBlock>();
  let chars = 0;
  for (const block of blocks) {
    if (block.type !== "image" || !isToolImage(block)) continue;
    chars += block.data!.length;
    if (chars > MAX_TOOL_IMAGE_CHARS) break;
    attached.add(block);
  }
  return attached;
}

function describeBlock(block: ContentBlock, attached: boolean): string {
  switch (block.type) {
    case "text":
      return block.text ?? "";
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType ?? "unknown type"}, ${base64Bytes(block.data)} bytes, ${attached ? "attached" : "not shown"}]`;
    case "resource_link":
      return `[resource link: ${block.uri ?? "?"}${labels(block.name ?? block.title, block.mimeType, block.description)}]`;
    case "resource": {
      const resource = block.resource ?? {};
      if (typeof resource.text === "string") return `[resource ${resource.uri ?? "?"}${labels(undefined, resource.mimeType)}]\n${resource.text}`;
      return `[resource ${resource.uri ?? "?"}${labels(undefined, resource.mimeType)}, ${base64Bytes(resource.blob)} bytes, not shown]`;
    }
    default:
      return `[${block.type} content, not shown]`;
  }
}

function labels(...parts: Array<string | undefined>): string {
  const present = parts.filter((part) => part !== undefined && part !== "");
  return present.length === 0 ? "" : ` (${present.join(", ")})`;
}

/** The decoded size of base64 text, without decoding it. */
function base64Bytes(data: string | undefined): number {
  if (!data) return 0;
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}
