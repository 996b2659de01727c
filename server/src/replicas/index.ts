export { LeasedOwnership, SoloOwnership, type OwnershipListener, type Route, type SessionOwnership } from "./ownership.ts";
export { forwardingService, FORWARDED_HEADER } from "./forwarding.ts";
export { replicaId } from "./replica-id.ts";
