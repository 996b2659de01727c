import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { serviceError } from "../errors/index.ts";

/** The authenticated workspace of a call; set by the authentication gate. */
export const workspaceContextKey = createContextKey<string | undefined>(undefined, { description: "workspace" });

/** The caller's workspace. Handlers of authenticated services call this first. */
export function requireWorkspace(context: HandlerContext): string {
  const workspace = context.values.get(workspaceContextKey);
  if (workspace === undefined) throw serviceError("unauthenticated", "this method requires an API key");
  return workspace;
}
