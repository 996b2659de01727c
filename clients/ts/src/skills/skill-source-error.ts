/**
 * A local skill source could not be read (a file or directory without read permission, one that
 * vanished while being read). The code is the client's own: the server never sees such a source.
 */
export class SkillSourceError extends Error {
  override name = "SkillSourceError";
  readonly code = "file_unreadable";
}
