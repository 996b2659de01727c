import { bytesAt, CORE_MODULE_PREAMBLE, END, GLOBAL_GET, I64_CONST, LIMITS_64, LIMITS_HAS_MAX, Reader, REF_FUNC } from "../wasm/index.ts";

export const SEC_CUSTOM = 0;
export const SEC_TYPE = 1;
export const SEC_IMPORT = 2;
export const SEC_FUNCTION = 3;
export const SEC_TABLE = 4;
export const SEC_MEMORY = 5;
export const SEC_GLOBAL = 6;
export const SEC_EXPORT = 7;
export const SEC_START = 8;
export const SEC_ELEMENT = 9;
export const SEC_CODE = 10;
export const SEC_DATA = 11;

export const KIND_FUNC = 0;
export const KIND_TABLE = 1;
export const KIND_MEMORY = 2;
export const KIND_GLOBAL = 3;
export const KIND_TAG = 4;

/** Position of each known section id in the mandatory section order (tag 13 and datacount 12 sit out of numeric order). */
const ORDER: readonly number[] = [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 11, 6];

/** A section's id and the byte range of its content within the module. */
export interface Section {
  readonly id: number;
  readonly start: number;
  readonly end: number;
}

export function readSections(module: Uint8Array): Section[] {
  if (!bytesAt(module, 0, CORE_MODULE_PREAMBLE)) throw new Error("not a core wasm module (bad magic or version)");
  const r = new Reader(module, CORE_MODULE_PREAMBLE.length, module.length);
  const sections: Section[] = [];
  while (r.pos < r.end) {
    const id = r.u8();
    if (id >= ORDER.length) throw new Error(`unknown section id ${id} at offset ${r.pos - 1}`);
    const size = r.u32();
    const start = r.pos;
    r.skip(size);
    sections.push({ id, start, end: r.pos });
  }
  return sections;
}

/** True when a section with this id must come after the section `other`. */
export function comesAfter(id: number, other: number): boolean {
  return id !== SEC_CUSTOM && ORDER[id]! > ORDER[other]!;
}

export function sectionReader(module: Uint8Array, s: Section): Reader {
  return new Reader(module, s.start, s.end);
}

/** table ::= tabletype | 0x40 0x00 tabletype expr: the prefix of a table with an initialiser (function references). */
const TABLE_WITH_INIT = 0x40;

/** Consumes a table's prefix if it has one; true when an initialiser expression follows its limits. */
export function readTableInitPrefix(r: Reader): boolean {
  if (r.peek() !== TABLE_WITH_INIT) return false;
  r.skip(2);
  return true;
}

/**
 * Skips table/memory limits: flags, min, optional max. 64-bit memories and tables are refused:
 * the bulk operators' sizes are charged as i32 (body.ts), and the memory cap refuses them too.
 * Flags above 7 (custom page sizes) would add fields this parser does not know.
 */
export function skipLimits(r: Reader): void {
  const flags = r.u8();
  if (flags > 7) throw new Error(`unsupported limits flags 0x${flags.toString(16)} at offset ${r.pos - 1}`);
  if (flags & LIMITS_64) throw new Error(`64-bit memories and tables are not supported (limits at offset ${r.pos - 1})`);
  r.skipLeb();
  if (flags & LIMITS_HAS_MAX) r.skipLeb();
}

/**
 * Reads a constant expression through its `end`: numeric/vector constants, ref.null/ref.func,
 * global.get, extended-const arithmetic. Calls `onIndex` for each global.get and ref.func with the
 * opcode, the index and where the index starts (`r.pos` is just past it).
 */
export function walkConstExpr(r: Reader, onIndex: (op: number, index: number, indexAt: number) => void): void {
  for (;;) {
    const at = r.pos;
    const op = r.u8();
    switch (op) {
      case END:
        return;
      case GLOBAL_GET:
      case REF_FUNC: {
        const indexAt = r.pos;
        onIndex(op, r.u32(), indexAt);
        break;
      }
      case 0x41: // i32.const
      case I64_CONST:
      case 0xd0: // ref.null heaptype
        r.skipLeb();
        break;
      case 0x43:
        r.skip(4);
        break;
      case 0x44:
        r.skip(8);
        break;
      case 0x6a: // i32.add, i32.sub, i32.mul, i64.add, i64.sub, i64.mul (extended-const)
      case 0x6b:
      case 0x6c:
      case 0x7c:
      case 0x7d:
      case 0x7e:
        break;
      case 0xfd: // v128.const
        if (r.u32() !== 0x0c) throw new Error(`unsupported SIMD opcode in constant expression at offset ${at}`);
        r.skip(16);
        break;
      default:
        throw new Error(`unsupported opcode 0x${op.toString(16)} in constant expression at offset ${at}`);
    }
  }
}

/** Skips one import's descriptor after its two names and kind byte. */
export function skipImportDesc(r: Reader, kind: number): void {
  switch (kind) {
    case KIND_FUNC:
      r.skipLeb();
      return;
    case KIND_TABLE:
      r.skipValType();
      skipLimits(r);
      return;
    case KIND_MEMORY:
      skipLimits(r);
      return;
    case KIND_GLOBAL:
      r.skipValType();
      r.u8();
      return;
    case KIND_TAG:
      r.u8();
      r.skipLeb();
      return;
    default:
      throw new Error(`unknown import kind ${kind} at offset ${r.pos - 1}`);
  }
}

/** Consumes a name and reports whether it equals `expected` (UTF-8 bytes). */
export function readNameEquals(r: Reader, expected: Uint8Array): boolean {
  const len = r.u32();
  const start = r.pos;
  r.skip(len);
  if (len !== expected.length) return false;
  for (let i = 0; i < len; i++) if (r.bytes[start + i] !== expected[i]) return false;
  return true;
}

/** Adds the memories and tables an import section imports to `counts`. */
export function countImports(r: Reader, counts: { memories: number; tables: number }): void {
  for (let n = r.u32(); n > 0; n--) {
    r.skipVec();
    r.skipVec();
    const kind = r.u8();
    skipImportDesc(r, kind);
    if (kind === KIND_MEMORY) counts.memories++;
    else if (kind === KIND_TABLE) counts.tables++;
  }
}
