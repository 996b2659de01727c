/**
 * A tool placement the client refuses before calling the server: an implementation of the wrong
 * form (or one its environment's kind does not take), a tool placed in an environment the
 * session does not define, a placement that `prepare` cannot prepare, a host definition
 * served in a session that does not bind it, or a run's agent loop of a tool's form or placed
 * anywhere but a service environment of its session. Refusals from the server are ConnectErrors
 * instead.
 */
export class PlacementError extends Error {
  override name = "PlacementError";
}
