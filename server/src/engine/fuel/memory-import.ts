import { CORE_MODULE_PREAMBLE, LIMITS_HAS_MAX, plainBytes, Writer } from "../wasm/index.ts";
import { RECYCLED_MEMORY } from "./import.ts";
import { comesAfter, countImports, KIND_MEMORY, readNameEquals, readSections, SEC_IMPORT, SEC_MEMORY, sectionReader, skipImportDesc } from "./sections.ts";

const encoder = new TextEncoder();
const RECYCLED_MODULE = encoder.encode(RECYCLED_MEMORY.module);
const RECYCLED_NAME = encoder.encode(RECYCLED_MEMORY.name);

/** A recycled memory's limits, in 64 KiB pages. */
export interface MemoryLimits {
  initial: number;
  maximum: number;
}

/**
 * Turns the one memory a module defines into an import (RECYCLED_MEMORY) with the same limits, so
 * that a worker can give each instance a memory it zeroed instead of mapping a fresh one (on this
 * project's machines the mapping and its release cost about 0.2 ms of CPU, and each page the guest
 * then touches a page fault; zeroing memory already resident costs about 25 µs a MiB). Done after
 * capMemory, which gave the memory its maximum.
 *
 * Only where that is exact: the module defines one memory and imports none, the memory is not
 * shared and has a maximum, and it starts with at most `maxPages` pages (a bound on what a worker
 * zeroes per instance). Its index stays 0, so its exports and data segments refer to it as before.
 * Returns undefined for any other module.
 */
export function importDefinedMemory(input: Uint8Array, maxPages: number): Uint8Array<ArrayBuffer> | undefined {
  const module = plainBytes(input);
  const sections = readSections(module);
  const memorySections = sections.filter((s) => s.id === SEC_MEMORY);
  const importSection = sections.find((s) => s.id === SEC_IMPORT);
  if (memorySections.length !== 1) return undefined;
  const imported = { memories: 0, tables: 0 };
  if (importSection) countImports(sectionReader(module, importSection), imported);
  if (imported.memories > 0) return undefined;
  const r = sectionReader(module, memorySections[0]!);
  if (r.u32() !== 1) return undefined;
  const flags = r.u8();
  if (flags !== LIMITS_HAS_MAX) return undefined; // shared, 64-bit, custom page sizes, or no maximum
  const limits = { initial: r.u32(), maximum: r.u32() };
  if (limits.initial > maxPages) return undefined;

  const imports = new Writer((importSection ? importSection.end - importSection.start : 0) + 32);
  if (importSection) {
    const existing = sectionReader(module, importSection);
    const count = existing.u32();
    imports.u32(count + 1);
    imports.copy(module, existing.pos, existing.end);
  } else {
    imports.u32(1);
  }
  imports.name(RECYCLED_MEMORY.module);
  imports.name(RECYCLED_MEMORY.name);
  imports.u8(KIND_MEMORY);
  imports.u8(LIMITS_HAS_MAX);
  imports.u32(limits.initial);
  imports.u32(limits.maximum);

  const out = new Writer(module.length + imports.len);
  out.copy(CORE_MODULE_PREAMBLE, 0, CORE_MODULE_PREAMBLE.length);
  let importsWritten = false;
  for (const s of sections) {
    if (!importsWritten && (s.id === SEC_IMPORT || comesAfter(s.id, SEC_IMPORT))) {
      out.section(SEC_IMPORT, imports);
      importsWritten = true;
    }
    if (s.id === SEC_IMPORT || s.id === SEC_MEMORY) continue;
    out.u8(s.id);
    out.u32(s.end - s.start);
    out.copy(module, s.start, s.end);
  }
  if (!importsWritten) out.section(SEC_IMPORT, imports);
  return out.result();
}

/** The limits of a module's RECYCLED_MEMORY import, if it has one (a worker reads them to make the memory). */
export function recycledMemoryLimits(input: Uint8Array): MemoryLimits | undefined {
  const module = plainBytes(input);
  const section = readSections(module).find((s) => s.id === SEC_IMPORT);
  if (!section) return undefined;
  const r = sectionReader(module, section);
  for (let n = r.u32(); n > 0; n--) {
    // Both names are read whatever the first says.
    const moduleMatches = readNameEquals(r, RECYCLED_MODULE);
    const nameMatches = readNameEquals(r, RECYCLED_NAME);
    const kind = r.u8();
    if (kind === KIND_MEMORY && moduleMatches && nameMatches) {
      if (r.u8() !== LIMITS_HAS_MAX) return undefined;
      return { initial: r.u32(), maximum: r.u32() };
    }
    skipImportDesc(r, kind);
  }
  return undefined;
}
