export { authorizeGrant, type GrantAllowLists, type GrantTarget } from "./authorize.ts";
export { parseGrants } from "./grant.ts";
