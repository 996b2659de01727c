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

/**
 * The text a model reads for a tool result's content: text blocks as they are; every other block
 * described in one bracketed line (what it is, its media type and size, its URI), since the
 * service hands a model tool results as text for every provider. Binary data never reaches the
 * journal: an image of a few megabytes would otherwise fill it and tell the model nothing.
 */
export function describeContent(content: readonly ContentBlock[]): string {
  return content.map(describeBlock).join("\n");
}

/**
 * A returned receipt's output: `{"content": <text>}`, with the server's `structuredContent`
 * beside it when it gave one (JSON the model and callers can read as is).
 */
export function outputOf(result: CallToolResult): string {
  return JSON.stringify(outputValue(result));
}

/** The same output as a value (what a host returns). */
export function outputValue(result: CallToolResult): { content: string; structuredContent?: Record<string, unknown> } {
  const content = describeContent(result.content ?? []);
  return result.structuredContent === undefined ? { content } : { content, structuredContent: result.structuredContent };
}

function describeBlock(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text ?? "";
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType ?? "unknown type"}, ${base64Bytes(block.data)} bytes, not shown]`;
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
