/** Why a skill's source could not be read; the codes are the client's own (the server never sees a source). */
export type SkillSourceErrorCode =
  /** A local file or folder without read permission, or one that vanished while being read. */
  | "file_unreadable"
  /** Skill.fromUrl: the request failed or answered an error status, or the bytes are not the expected ones. */
  | "download_failed";

/** A skill's source could not be read. The same class and codes as the Python client's. */
export class SkillSourceError extends Error {
  override name = "SkillSourceError";
  readonly code: SkillSourceErrorCode;

  constructor(code: SkillSourceErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}
