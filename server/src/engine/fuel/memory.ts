import { CORE_MODULE_PREAMBLE, LIMITS_HAS_MAX, LIMITS_SHARED, MAX_PAGES_32, PAGE_BYTES, plainBytes, type Reader, Writer } from "../wasm/index.ts";
import { CAPPED_EXPORT_PREFIX, cappedExportName } from "./capped-export.ts";
import { planMaxima, TABLE_ENTRY_BYTES, type Limits } from "./footprint.ts";
import {
  comesAfter,
  countImports,
  KIND_MEMORY,
  KIND_TABLE,
  readSections,
  readTableInitPrefix,
  SEC_EXPORT,
  SEC_IMPORT,
  SEC_MEMORY,
  SEC_TABLE,
  sectionReader,
  skipImportDesc,
  walkConstExpr,
  type Section,
} from "./sections.ts";

const decoder = new TextDecoder();

/** A memory or table the module defines: its limits and its index (after the imported ones). */
interface Defined extends Limits {
  index: number;
}

/**
 * Caps a module's guest memory at `maxPages` (64 KiB pages): the memories and tables it defines
 * get maxima whose sum fits the cap (footprint.ts), and memory.grow and table.grow past them
 * return -1. A module whose minimums do not fit is refused. Imported memories and tables get a
 * maximum within the cap, which whoever supplies them must meet. Every memory or table whose
 * maximum the cap set (it declared none, or a larger one) is exported under a reserved name
 * (capped-export.ts), so the host can see it reach the cap.
 */
export function capMemory(input: Uint8Array, maxPages: number): Uint8Array<ArrayBuffer> {
  const module = plainBytes(input);
  if (!Number.isInteger(maxPages) || maxPages < 0 || maxPages > MAX_PAGES_32) {
    throw new RangeError(`maxPages must be an integer in [0, ${MAX_PAGES_32}], got ${maxPages}`);
  }
  const sections = readSections(module);
  const capBytes = maxPages * PAGE_BYTES;
  const imported = { memories: 0, tables: 0 };
  const memories: Defined[] = [];
  const tables: Defined[] = [];
  for (const s of sections) {
    if (s.id === SEC_IMPORT) countImports(sectionReader(module, s), imported);
    else if (s.id === SEC_MEMORY)
      readEach(sectionReader(module, s), (r) => memories.push({ index: imported.memories + memories.length, ...readMemoryLimits(r) }));
    else if (s.id === SEC_TABLE) readEach(sectionReader(module, s), (r) => tables.push({ index: imported.tables + tables.length, ...readTable(r) }));
  }
  const maxima = planMaxima(memories, tables, capBytes);
  const exports = new Writer(64);
  let added = 0;
  const exportIfCapped = (kind: "memory" | "table", object: Defined, maximum: number) => {
    if ((object.max ?? Infinity) <= maximum) return; // its own maximum, not the cap's
    exports.name(cappedExportName(kind, object.index, maximum));
    exports.u8(kind === "memory" ? KIND_MEMORY : KIND_TABLE);
    exports.u32(object.index);
    added++;
  };
  memories.forEach((memory, k) => exportIfCapped("memory", memory, maxima.memories[k]!));
  tables.forEach((table, k) => exportIfCapped("table", table, maxima.tables[k]!));

  const out = new Writer(module.length + exports.len + 64);
  out.copy(CORE_MODULE_PREAMBLE, 0, CORE_MODULE_PREAMBLE.length);
  let exportsWritten = false;
  for (const s of sections) {
    if (!exportsWritten && (s.id === SEC_EXPORT || comesAfter(s.id, SEC_EXPORT))) {
      out.section(SEC_EXPORT, exportSection(module, s.id === SEC_EXPORT ? s : undefined, exports, added));
      exportsWritten = true;
      if (s.id === SEC_EXPORT) continue;
    }
    if (s.id === SEC_IMPORT) out.section(s.id, capImports(module, s, maxPages, Math.floor(capBytes / TABLE_ENTRY_BYTES)));
    else if (s.id === SEC_MEMORY)
      out.section(
        s.id,
        rewriteEach(module, s, (r, w, k) => writeLimits(w, readMemoryLimits(r), maxima.memories[k]!)),
      );
    else if (s.id === SEC_TABLE)
      out.section(
        s.id,
        rewriteEach(module, s, (r, w, k) => rewriteTable(r, w, maxima.tables[k]!)),
      );
    else {
      out.u8(s.id);
      out.u32(s.end - s.start);
      out.copy(module, s.start, s.end);
    }
  }
  if (!exportsWritten) out.section(SEC_EXPORT, exportSection(module, undefined, exports, added));
  return out.result();
}

/**
 * Imported memories and tables belong to the module that defines them, which was capped itself;
 * here each gets at most the whole cap (`maxPages`, `maxEntries`), so any exporter capped with
 * the same cap still links.
 */
function capImports(module: Uint8Array, s: Section, maxPages: number, maxEntries: number): Writer {
  const r = sectionReader(module, s);
  const w = new Writer(s.end - s.start + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    const start = r.pos;
    r.skipVec(); // module name
    r.skipVec(); // field name
    const kind = r.u8();
    if (kind === KIND_MEMORY) {
      w.copy(module, start, r.pos);
      const limits = readMemoryLimits(r);
      if (limits.min > maxPages) throw new Error(`imported memory minimum ${limits.min} pages exceeds the cap of ${maxPages} pages`);
      writeLimits(w, limits, maxPages);
    } else if (kind === KIND_TABLE) {
      r.skipValType();
      w.copy(module, start, r.pos);
      const limits = readTableLimits(r);
      if (limits.min > maxEntries) throw new Error(`imported table minimum ${limits.min} entries exceeds the cap of ${maxEntries} entries`);
      writeLimits(w, limits, maxEntries);
    } else {
      skipImportDesc(r, kind);
      w.copy(module, start, r.pos);
    }
  }
  return w;
}

/** A table entry: an optional prefix announcing an initialiser, the reference type, limits, the initialiser. */
function readTable(r: Reader): Limits {
  const withInit = readTableInitPrefix(r);
  r.skipValType();
  const limits = readTableLimits(r);
  if (withInit) walkConstExpr(r, () => undefined);
  return limits;
}

function rewriteTable(r: Reader, w: Writer, maximum: number): void {
  const start = r.pos;
  const withInit = readTableInitPrefix(r);
  r.skipValType();
  w.copy(r.bytes, start, r.pos);
  writeLimits(w, readTableLimits(r), maximum);
  const init = r.pos;
  if (withInit) walkConstExpr(r, () => undefined);
  w.copy(r.bytes, init, r.pos);
}

/** A memory may be shared (kept); memory64 and custom page sizes are refused. */
function readMemoryLimits(r: Reader): Limits & { flags: number } {
  return readLimits(r, ~(LIMITS_HAS_MAX | LIMITS_SHARED), "memory");
}

/** table64 is refused. */
function readTableLimits(r: Reader): Limits & { flags: number } {
  return readLimits(r, ~LIMITS_HAS_MAX, "table");
}

function readLimits(r: Reader, unsupported: number, what: string): Limits & { flags: number } {
  const at = r.pos;
  const flags = r.u8();
  if (flags & unsupported) throw new Error(`unsupported ${what} limits flags 0x${flags.toString(16)} at offset ${at}`);
  const min = r.u32();
  return { flags, min, max: flags & LIMITS_HAS_MAX ? r.u32() : undefined };
}

/** The limits with a maximum of at most `maximum` (a smaller declared one is kept). */
function writeLimits(w: Writer, limits: Limits & { flags: number }, maximum: number): void {
  w.u8(limits.flags | LIMITS_HAS_MAX);
  w.u32(limits.min);
  w.u32(Math.min(limits.max ?? Infinity, maximum));
}

/** The module's exports, refusing any under the reserved prefix, then the `added` ones. */
function exportSection(module: Uint8Array, existing: Section | undefined, added: Writer, count: number): Writer {
  const w = new Writer((existing ? existing.end - existing.start : 0) + added.len + 8);
  const r = existing ? sectionReader(module, existing) : undefined;
  const n = r ? r.u32() : 0;
  w.u32(n + count);
  for (let i = 0; i < n; i++) {
    const start = r!.pos;
    const length = r!.u32();
    const name = decoder.decode(module.subarray(r!.pos, r!.pos + length));
    if (name.startsWith(CAPPED_EXPORT_PREFIX)) throw new Error(`the module exports ${name}, a name the service reserves`);
    r!.skip(length);
    r!.u8(); // kind
    r!.u32(); // index
    w.copy(module, start, r!.pos);
  }
  w.copy(added.buf, 0, added.len);
  return w;
}

function readEach(r: Reader, read: (r: Reader) => void): void {
  for (let n = r.u32(); n > 0; n--) read(r);
}

function rewriteEach(module: Uint8Array, s: Section, rewrite: (r: Reader, w: Writer, k: number) => void): Writer {
  const r = sectionReader(module, s);
  const w = new Writer(s.end - s.start + 16);
  const n = w.copyCount(r);
  for (let k = 0; k < n; k++) rewrite(r, w, k);
  return w;
}

/**
 * The sum of the minimum sizes, in 64 KiB pages, of the memories the module defines (imported
 * memories belong to the module that defines them): the memory an instance starts with.
 */
export function definedMemoryPages(input: Uint8Array): number {
  const module = plainBytes(input);
  let pages = 0;
  for (const s of readSections(module)) {
    if (s.id === SEC_MEMORY) readEach(sectionReader(module, s), (r) => (pages += readMemoryLimits(r).min));
  }
  return pages;
}
