import { BodyInstrumenter } from "./body.ts";
import { plainBytes, type Reader, Writer } from "./leb.ts";
import { readModuleInfo, type ModuleInfo } from "./module-info.ts";
import {
  rewriteDataSection,
  rewriteElementSection,
  rewriteExportSection,
  rewriteGlobalSection,
  rewriteNameSection,
  rewriteTableSection,
  shiftDefinedGlobals,
  type GlobalMap,
} from "./renumber.ts";
import {
  followsImports,
  HEADER,
  KIND_GLOBAL,
  readSections,
  SEC_CODE,
  SEC_CUSTOM,
  SEC_DATA,
  SEC_ELEMENT,
  SEC_EXPORT,
  SEC_GLOBAL,
  SEC_IMPORT,
  SEC_TABLE,
  sectionReader,
  type Section,
} from "./sections.ts";

/** The fuel counter every instrumented module imports: a mutable i64 holding the remaining fuel. */
export const FUEL_IMPORT = { module: "skillenv:fuel", name: "remaining" } as const;

export interface InstrumentResult {
  bytes: Uint8Array<ArrayBuffer>;
  functionsInstrumented: number;
}

const I64 = 0x7e;
const encoder = new TextEncoder();

/**
 * Rewrites a core wasm module so every function subtracts its straight-line cost from the imported
 * i64 global and traps (unreachable) when it goes negative.
 */
export function instrumentFuel(input: Uint8Array): InstrumentResult {
  const module = plainBytes(input);
  const sections = readSections(module);
  const info = readModuleInfo(module, sections, FUEL_IMPORT);
  const map = shiftDefinedGlobals(info.importedGlobals);
  const out = new Writer(module.length + (module.length >> 1));
  out.copy(HEADER, 0, HEADER.length);
  let importsWritten = false;
  let functionsInstrumented = 0;
  for (const s of sections) {
    if (!importsWritten && (s.id === SEC_IMPORT || followsImports(s.id))) {
      out.section(SEC_IMPORT, importSectionWithFuel(module, s.id === SEC_IMPORT ? s : undefined));
      importsWritten = true;
      if (s.id === SEC_IMPORT) continue;
    }
    if (s.id === SEC_CODE) {
      out.u8(SEC_CODE);
      const sizeAt = out.beginSized();
      functionsInstrumented = instrumentCode(module, s, info, out);
      out.endSized(sizeAt);
    } else {
      writeSection(out, module, s, map);
    }
  }
  if (!importsWritten) out.section(SEC_IMPORT, importSectionWithFuel(module, undefined));
  return { bytes: out.result(), functionsInstrumented };
}

/** Copies a section, rewriting it first when it can mention a global index. */
function writeSection(out: Writer, module: Uint8Array, s: Section, map: GlobalMap): void {
  const rewrite = globalRewriter(module, s);
  if (rewrite) {
    out.section(s.id, rewrite(sectionReader(module, s), map));
    return;
  }
  out.u8(s.id);
  out.u32(s.end - s.start);
  out.copy(module, s.start, s.end);
}

function globalRewriter(module: Uint8Array, s: Section): ((r: Reader, map: GlobalMap) => Writer) | undefined {
  switch (s.id) {
    case SEC_TABLE:
      return rewriteTableSection;
    case SEC_GLOBAL:
      return rewriteGlobalSection;
    case SEC_EXPORT:
      return rewriteExportSection;
    case SEC_ELEMENT:
      return rewriteElementSection;
    case SEC_DATA:
      return rewriteDataSection;
    case SEC_CUSTOM:
      return isNameSection(module, s) ? rewriteNameSection : undefined;
    default:
      return undefined;
  }
}

function isNameSection(module: Uint8Array, s: Section): boolean {
  const r = sectionReader(module, s);
  const len = r.u32();
  return len === 4 && String.fromCharCode(...module.subarray(r.pos, r.pos + 4)) === "name";
}

/** Existing imports verbatim, then the fuel global: appending keeps every imported index stable. */
function importSectionWithFuel(module: Uint8Array, existing: Section | undefined): Writer {
  const w = new Writer((existing ? existing.end - existing.start : 0) + 64);
  let count = 0;
  let entriesStart = 0;
  if (existing) {
    const r = sectionReader(module, existing);
    count = r.u32();
    entriesStart = r.pos;
  }
  w.u32(count + 1);
  if (existing) w.copy(module, entriesStart, existing.end);
  writeName(w, FUEL_IMPORT.module);
  writeName(w, FUEL_IMPORT.name);
  w.u8(KIND_GLOBAL);
  w.u8(I64);
  w.u8(1); // mutable
  return w;
}

function writeName(w: Writer, name: string): void {
  const bytes = encoder.encode(name);
  w.u32(bytes.length);
  w.copy(bytes, 0, bytes.length);
}

/** Writes the instrumented code section's content to `w`; returns the number of bodies. */
function instrumentCode(module: Uint8Array, s: Section, info: ModuleInfo, w: Writer): number {
  const r = sectionReader(module, s);
  const count = r.u32();
  if (count !== info.funcTypes.length) {
    throw new Error(`code section has ${count} bodies but the function section declares ${info.funcTypes.length}`);
  }
  const body = new BodyInstrumenter(info.importedGlobals);
  w.u32(count);
  for (let i = 0; i < count; i++) {
    const params = info.typeParams[info.funcTypes[i]!];
    if (params === undefined) throw new Error(`function ${i} has unknown type ${info.funcTypes[i]}`);
    instrumentFunction(r, w, body, params);
  }
  return count;
}

/** One code entry: the locals gain an i64 counter after all existing locals; the body is instrumented. */
function instrumentFunction(r: Reader, w: Writer, body: BodyInstrumenter, params: number): void {
  const end = r.u32() + r.pos;
  if (end > r.end) throw new Error(`function body at offset ${r.pos} overruns the code section`);
  const groups = r.u32();
  const groupsStart = r.pos;
  let locals = params;
  for (let g = 0; g < groups; g++) {
    locals += r.u32();
    r.skipValType();
  }
  const groupsEnd = r.pos;
  body.instrument(r.bytes, groupsEnd, end, locals);
  const sizeAt = w.beginSized();
  w.u32(groups + 1);
  w.copy(r.bytes, groupsStart, groupsEnd);
  w.u8(1); // one local of type i64: the counter
  w.u8(I64);
  body.writeTo(w);
  w.endSized(sizeAt);
  r.pos = end;
}
