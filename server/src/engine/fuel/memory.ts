import { plainBytes, type Reader, Writer } from "./leb.ts";
import { HEADER, KIND_MEMORY, readSections, SEC_IMPORT, SEC_MEMORY, sectionReader, skipImportDesc, type Section } from "./sections.ts";

/** 4 GiB of 64 KiB pages: the most a 32-bit memory can address. */
const MAX_PAGES_32 = 65536;

/**
 * Rewrites defined and imported memories so their maximum is at most maxPages (64 KiB pages);
 * a module that declares a larger minimum is rejected. memory.grow past the cap then returns -1.
 */
export function capMemory(input: Uint8Array, maxPages: number): Uint8Array<ArrayBuffer> {
  const module = plainBytes(input);
  if (!Number.isInteger(maxPages) || maxPages < 0 || maxPages > MAX_PAGES_32) {
    throw new RangeError(`maxPages must be an integer in [0, ${MAX_PAGES_32}], got ${maxPages}`);
  }
  const out = new Writer(module.length + 16);
  out.copy(HEADER, 0, HEADER.length);
  for (const s of readSections(module)) {
    if (s.id === SEC_IMPORT) out.section(s.id, capImports(module, s, maxPages));
    else if (s.id === SEC_MEMORY) out.section(s.id, capMemorySection(module, s, maxPages));
    else {
      out.u8(s.id);
      out.u32(s.end - s.start);
      out.copy(module, s.start, s.end);
    }
  }
  return out.result();
}

function capImports(module: Uint8Array, s: Section, maxPages: number): Writer {
  const r = sectionReader(module, s);
  const w = new Writer(s.end - s.start + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    const start = r.pos;
    r.skipVec(); // module name
    r.skipVec(); // field name
    const kind = r.u8();
    if (kind === KIND_MEMORY) {
      w.copy(module, start, r.pos);
      capLimits(r, w, maxPages);
    } else {
      skipImportDesc(r, kind);
      w.copy(module, start, r.pos);
    }
  }
  return w;
}

function capMemorySection(module: Uint8Array, s: Section, maxPages: number): Writer {
  const r = sectionReader(module, s);
  const w = new Writer(s.end - s.start + 16);
  for (let n = w.copyCount(r); n > 0; n--) capLimits(r, w, maxPages);
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
    if (s.id !== SEC_MEMORY) continue;
    const r = sectionReader(module, s);
    for (let n = r.u32(); n > 0; n--) {
      const flags = r.u8();
      pages += r.u32();
      if (flags & 1) r.u32();
    }
  }
  return pages;
}

/** Limits flags: bit 0 has-max, bit 1 shared (kept); memory64 and custom page sizes are refused. */
function capLimits(r: Reader, w: Writer, maxPages: number): void {
  const at = r.pos;
  const flags = r.u8();
  if (flags & ~3) throw new Error(`unsupported memory limits flags 0x${flags.toString(16)} at offset ${at}`);
  const min = r.u32();
  const max = flags & 1 ? r.u32() : MAX_PAGES_32;
  if (min > maxPages) throw new Error(`memory minimum ${min} pages exceeds the cap of ${maxPages} pages`);
  w.u8(flags | 1);
  w.u32(min);
  w.u32(Math.min(max, maxPages));
}
