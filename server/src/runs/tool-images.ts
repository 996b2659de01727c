import { isToolImage, MAX_TOOL_IMAGE_CHARS, type ToolImage } from "@skillenv/client/mcp";

/**
 * A returned output's images, taken out of the text the model reads: an output that is a JSON
 * object with `images`, a non-empty list of `{ mimeType, data }` (a type models take, base64)
 * within MAX_TOOL_IMAGE_CHARS together, which is how an MCP tool's result is kept (docs/mcp.md,
 * "Content") and how any tool may show a model images. Anything else stays the output as it is.
 */
export function withImages(output: string): { output: string; images: ToolImage[] | undefined } {
  const unchanged = { output, images: undefined };
  if (!output.includes('"images"')) return unchanged;
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    return unchanged;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return unchanged;
  const { images, ...rest } = value as Record<string, unknown>;
  if (!Array.isArray(images) || images.length === 0 || !images.every(isToolImage)) return unchanged;
  if (images.reduce((chars, image) => chars + image.data.length, 0) > MAX_TOOL_IMAGE_CHARS) return unchanged;
  return { output: JSON.stringify(rest), images: images.map(({ mimeType, data }) => ({ mimeType, data })) };
}
