// Reads and writes on an open host file, with its growth charged to the preopen's account: the one
// place where file contents change, for descriptors and streams alike.
import { fstatSync, ftruncateSync, readSync, writeSync } from "node:fs";
import { charged, type QuotaAccount } from "./quota.ts";
import { growth } from "./usage.ts";

/** Most bytes one read returns (a guest asking for more gets a short read). */
export const MAX_READ_BYTES = 1024 * 1024;

/** A guest's 64-bit offset or length as a safe integer (`invalid` beyond 2^53, where no file goes). */
export function safeNumber(value: bigint | number): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 0) throw "invalid";
  return number;
}

/** A guest's read length, capped at MAX_READ_BYTES (a read may always be short). */
export function readLength(value: bigint): number {
  if (typeof value !== "bigint" || value < 0n) throw "invalid";
  return value > BigInt(MAX_READ_BYTES) ? MAX_READ_BYTES : Number(value);
}

export function sizeOf(fd: number): number {
  return fstatSync(fd).size;
}

/** Up to `length` bytes (at most MAX_READ_BYTES) at `position`; empty at the end of the file. */
export function readAt(fd: number, length: number, position: number): Uint8Array {
  const buffer = new Uint8Array(Math.min(length, MAX_READ_BYTES));
  const read = readSync(fd, buffer, 0, buffer.length, position);
  return buffer.subarray(0, read);
}

/**
 * Writes all of `bytes` at `position`. The growth of the file is reserved first (`quota`, and
 * nothing written, if refused); what a failed or short write did not use is released.
 */
export function writeAt(fd: number, account: QuotaAccount, bytes: Uint8Array, position: number): number {
  const before = sizeOf(fd);
  const reserved = growth(before, position + bytes.length);
  if (reserved > 0 && !account.reserve(reserved)) throw "quota";
  let written = 0;
  try {
    while (written < bytes.length) {
      const count = writeSync(fd, bytes, written, bytes.length - written, position + written);
      if (count === 0) throw "io";
      written += count;
    }
  } finally {
    // Failed part-way (ENOSPC, ...): keep what the file did grow by, give back the rest.
    if (written < bytes.length && reserved > 0) account.release(reserved - Math.min(reserved, growth(before, sizeOf(fd))));
  }
  return written;
}

/** Sets the file's size: growth reserved first, shrinking released after. */
export function resize(fd: number, account: QuotaAccount, size: number): void {
  const before = sizeOf(fd);
  charged(account, growth(before, size), () => ftruncateSync(fd, size));
  if (size < before) account.release(before - size);
}
