/**
 * A tool placement the client refuses before calling the server: an implementation of the wrong
 * form, a tool placed in an environment the session does not define, or a placement that
 * `prepare` cannot prepare. Refusals from the server are ConnectErrors instead.
 */
export class PlacementError extends Error {
  override name = "PlacementError";
}
