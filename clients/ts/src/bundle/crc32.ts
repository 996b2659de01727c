/**
 * CRC-32 as zip uses it (IEEE 802.3, reflected polynomial 0xEDB88320). On Node the native
 * zlib.crc32 is used (about 10x faster on multi-megabyte bundles); elsewhere (browsers) a
 * slicing-by-8 table loop, which consumes eight bytes per step.
 */

type Crc32 = (bytes: Uint8Array) => number;

interface NodeProcess {
  getBuiltinModule?(id: "node:zlib"): { crc32?: Crc32 } | undefined;
}

const nativeCrc32: Crc32 | undefined = (globalThis as { process?: NodeProcess }).process?.getBuiltinModule?.("node:zlib")?.crc32;

const TABLES = buildTables();

function buildTables(): Uint32Array[] {
  const tables = Array.from({ length: 8 }, () => new Uint32Array(256));
  const first = tables[0]!;
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    first[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    for (let t = 1; t < 8; t++) tables[t]![n] = (first[tables[t - 1]![n]! & 0xff]! ^ (tables[t - 1]![n]! >>> 8)) >>> 0;
  }
  return tables;
}

export function crc32(bytes: Uint8Array): number {
  return nativeCrc32 ? nativeCrc32(bytes) : tableCrc32(bytes);
}

/** Exported for tests, which check it against the native one. */
export function tableCrc32(bytes: Uint8Array): number {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = TABLES as [Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array, Uint32Array];
  let crc = 0xffffffff;
  let i = 0;
  const end8 = bytes.length - (bytes.length % 8);
  for (; i < end8; i += 8) {
    const low = (crc ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24))) >>> 0;
    crc =
      t7[low & 0xff]! ^
      t6[(low >>> 8) & 0xff]! ^
      t5[(low >>> 16) & 0xff]! ^
      t4[low >>> 24]! ^
      t3[bytes[i + 4]!]! ^
      t2[bytes[i + 5]!]! ^
      t1[bytes[i + 6]!]! ^
      t0[bytes[i + 7]!]!;
  }
  for (; i < bytes.length; i++) crc = t0[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
