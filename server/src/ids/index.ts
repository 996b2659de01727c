import { randomBytes } from "node:crypto";

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/**
 * A new identifier `<prefix>_<26 characters>`: 48 bits of milliseconds then 80 random bits, in
 * Crockford base32 (ULID layout, lower case). Ids of one prefix sort by creation time, so a
 * reverse range scan lists newest first; the random part makes them unguessable.
 */
export function newId(prefix: string, now = Date.now()): string {
  return `${prefix}_${encodeTime(now)}${encodeRandom(randomBytes(10))}`;
}

/**
 * The lowest id newId could give for `prefix` at `ms` or later: every such id sorts at or above
 * it, and every id of the prefix made earlier below it (a range scan's bound by creation time).
 */
export function idFloor(prefix: string, ms: number): string {
  return `${prefix}_${encodeTime(ms)}`;
}

/** Whether `id` has the shape newId gives for `prefix`. */
export function isId(prefix: string, id: string): boolean {
  return id.length === prefix.length + 27 && id.startsWith(`${prefix}_`) && /^[0-9a-hjkmnp-tv-z]{26}$/.test(id.slice(prefix.length + 1));
}

function encodeTime(ms: number): string {
  let text = "";
  for (let i = 0; i < 10; i++) {
    text = CROCKFORD[ms % 32]! + text;
    ms = Math.floor(ms / 32);
  }
  return text;
}

function encodeRandom(bytes: Uint8Array): string {
  let bits = 0n;
  for (const byte of bytes) bits = (bits << 8n) | BigInt(byte);
  let text = "";
  for (let i = 0; i < 16; i++) {
    text = CROCKFORD[Number(bits & 31n)]! + text;
    bits >>= 5n;
  }
  return text;
}
