import { serviceError } from "../errors/index.ts";

/**
 * Bounds on what a caller stores in a record (a session's placements and environments, a run's
 * submission), so that no record, and no page of a listing, grows with what one caller chose
 * to send (docs/operations.md: SERVICE_MAX_FIELD_BYTES, SERVICE_SESSION_MAX_BYTES). Every
 * refusal is field_too_large naming the field (a path such as `tools[3].inputSchema`), its size
 * and the limit, before anything is created.
 */

/** The setting that bounds every caller-given value of a session or run. */
export const FIELD_SETTING = "SERVICE_MAX_FIELD_BYTES";

/** Whether `text` is at most `maxBytes` as UTF-8. */
export function fitsBytes(text: string, maxBytes: number): boolean {
  // More UTF-16 units than maxBytes is more UTF-8 bytes too: a huge text is not counted.
  return text.length <= maxBytes && Buffer.byteLength(text) <= maxBytes;
}

/** Refuses text above `maxBytes` as UTF-8. */
export function checkTextSize(field: string, text: string, maxBytes: number, setting: string): void {
  if (!fitsBytes(text, maxBytes)) throw fieldTooLarge(field, Buffer.byteLength(text), maxBytes, setting);
}

/** Refuses a JSON value whose JSON text is above `maxBytes`; returns that text. */
export function checkJsonSize(field: string, value: unknown, maxBytes: number, setting: string): string {
  const text = JSON.stringify(value) ?? "null";
  checkTextSize(field, text, maxBytes, setting);
  return text;
}

/** Refuses text of more than `maxChars` characters (a limit of the contract counted in characters). */
export function checkTextChars(field: string, text: string, maxChars: number): void {
  const chars = text.length;
  if (chars <= maxChars) return;
  throw serviceError("field_too_large", `${field} has ${chars} characters, more than ${maxChars}`, {
    field,
    sizeChars: String(chars),
    maxChars: String(maxChars),
  });
}

function fieldTooLarge(field: string, sizeBytes: number, maxBytes: number, setting: string) {
  return serviceError("field_too_large", `${field} is ${sizeBytes} bytes, more than ${setting} (${maxBytes})`, {
    field,
    sizeBytes: String(sizeBytes),
    maxBytes: String(maxBytes),
  });
}
