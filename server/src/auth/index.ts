export { ApiKeys, DEV_KEY_FILE, DEV_WORKSPACE, loadOrCreateDevKey } from "./api-keys.ts";
export { requireWorkspace, workspaceContextKey } from "./context.ts";
export { authenticationGate, bearerAuthenticator, type RequestGate } from "./gate.ts";
export { RESPONSE_BYTES_PER_REQUEST, WorkspaceRateLimiter } from "./workspace-rate.ts";
