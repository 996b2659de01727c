/** A tool as an MCP server lists it (2025-11-25), as much of it as is placed. */
export interface ListedMcpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** What listing needs of an MCP client (the SDK's Client has it). */
export interface ToolLister {
  listTools(params?: { cursor?: string }, options?: { signal?: AbortSignal; timeout?: number }): Promise<{ tools: ListedMcpTool[]; nextCursor?: string }>;
}

/** A server that keeps answering tools/list with a next cursor is cut off here. */
export const MAX_TOOL_PAGES = 100;
const MAX_DESCRIPTION_CHARS = 4096;

/** The server's tools/list went wrong: past MAX_TOOL_PAGES pages, or a cursor repeated. */
export class ToolListingError extends Error {
  override name = "ToolListingError";
}

/** Every tool the server lists, following `nextCursor` page after page; throws ToolListingError on a listing that does not end. */
export async function listAllTools(client: ToolLister, options: { signal?: AbortSignal; timeout?: number } = {}): Promise<ListedMcpTool[]> {
  const listed: ListedMcpTool[] = [];
  const cursors = new Set<string>();
  for (let cursor: string | undefined, page = 0; ; page++) {
    if (page === MAX_TOOL_PAGES) throw new ToolListingError(`the server's tools/list went on past ${MAX_TOOL_PAGES} pages`);
    const result = await client.listTools(cursor === undefined ? undefined : { cursor }, options);
    listed.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) return listed;
    if (cursors.has(cursor)) throw new ToolListingError("the server's tools/list repeated a cursor");
    cursors.add(cursor);
  }
}

/** A placement's description: the tool's description, else its title, cut to 4096 characters. */
export function placedDescription(tool: ListedMcpTool): string {
  return [...(tool.description ?? tool.title ?? "")].slice(0, MAX_DESCRIPTION_CHARS).join("");
}

/** The server's name of the tool a placement's implementation (`{"mcpTool": "<name>"}`) names. */
export function mcpToolOf(implementation: unknown): string | undefined {
  const tool = (implementation as { mcpTool?: unknown } | null | undefined)?.mcpTool;
  return typeof tool === "string" ? tool : undefined;
}
