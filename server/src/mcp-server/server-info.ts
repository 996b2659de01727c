/** How the service names itself to MCP clients (`serverInfo` of `initialize`), as its MCP client does to servers (environments/mcp). */
export const SERVER_INFO = { name: "skillenv", title: "skillenv skills registry and sessions", version: "0.1.0" } as const;
