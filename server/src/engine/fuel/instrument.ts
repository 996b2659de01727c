import { CORE_MODULE_PREAMBLE, I32, I64, plainBytes, type Reader, Writer } from "../wasm/index.ts";
import { BodyInstrumenter } from "./body.ts";
import { CallPlan, CounterCannotPass } from "./calls.ts";
import { FUEL_IMPORT } from "./import.ts";
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
  comesAfter,
  KIND_GLOBAL,
  readSections,
  SEC_CODE,
  SEC_CUSTOM,
  SEC_DATA,
  SEC_ELEMENT,
  SEC_EXPORT,
  SEC_FUNCTION,
  SEC_GLOBAL,
  SEC_IMPORT,
  SEC_TABLE,
  SEC_TYPE,
  sectionReader,
  type Section,
} from "./sections.ts";

export interface InstrumentResult {
  bytes: Uint8Array<ArrayBuffer>;
  functionsInstrumented: number;
}

/**
 * Rewrites a core wasm module so every function subtracts its straight-line cost from the imported
 * i64 global and traps (unreachable) when it goes negative. Direct calls pass the counter along
 * (calls.ts); a module with a tail call that cannot (to an import, or indirect) is rewritten
 * with the counter going through the global at every call instead. Both charge the same fuel.
 */
export function instrumentFuel(input: Uint8Array): InstrumentResult {
  const module = plainBytes(input);
  const sections = readSections(module);
  const info = readModuleInfo(module, sections, FUEL_IMPORT);
  try {
    return rewrite(module, sections, info, new CallPlan(module, info));
  } catch (error) {
    if (!(error instanceof CounterCannotPass)) throw error;
    return rewrite(module, sections, info, undefined);
  }
}

function rewrite(module: Uint8Array, sections: readonly Section[], info: ModuleInfo, calls: CallPlan | undefined): InstrumentResult {
  const map = shiftDefinedGlobals(info.importedGlobals);
  const out = new Writer(module.length + (module.length >> 1));
  out.copy(CORE_MODULE_PREAMBLE, 0, CORE_MODULE_PREAMBLE.length);
  let importsWritten = false;
  let typesWritten = false;
  for (const s of sections) {
    // A module without functions has no type section, and needs none.
    if (calls && !typesWritten && (s.id === SEC_TYPE || comesAfter(s.id, SEC_TYPE))) {
      out.section(SEC_TYPE, calls.typeSection(s.id === SEC_TYPE ? s : undefined));
      typesWritten = true;
      if (s.id === SEC_TYPE) continue;
    }
    if (!importsWritten && (s.id === SEC_IMPORT || comesAfter(s.id, SEC_IMPORT))) {
      out.section(SEC_IMPORT, importSectionWithFuel(module, s.id === SEC_IMPORT ? s : undefined));
      importsWritten = true;
      if (s.id === SEC_IMPORT) continue;
    }
    if (s.id === SEC_CODE) {
      out.u8(SEC_CODE);
      const sizeAt = out.beginSized();
      instrumentCode(module, s, info, calls, out);
      out.endSized(sizeAt);
    } else if (s.id === SEC_FUNCTION && calls) {
      out.section(SEC_FUNCTION, calls.functionSection());
    } else {
      writeSection(out, module, s, map, calls);
    }
  }
  if (!importsWritten) out.section(SEC_IMPORT, importSectionWithFuel(module, undefined));
  return { bytes: out.result(), functionsInstrumented: info.funcTypes.length };
}

/** Copies a section, rewriting it first when it can mention a global index (or, for names, a local). */
function writeSection(out: Writer, module: Uint8Array, s: Section, map: GlobalMap, calls: CallPlan | undefined): void {
  if (s.id === SEC_CUSTOM && isNameSection(module, s)) {
    out.section(s.id, rewriteNameSection(sectionReader(module, s), map, calls));
    return;
  }
  const rewrite = globalRewriter(s);
  if (rewrite) {
    out.section(s.id, rewrite(sectionReader(module, s), map));
    return;
  }
  out.u8(s.id);
  out.u32(s.end - s.start);
  out.copy(module, s.start, s.end);
}

function globalRewriter(s: Section): ((r: Reader, map: GlobalMap) => Writer) | undefined {
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
  w.name(FUEL_IMPORT.module);
  w.name(FUEL_IMPORT.name);
  w.u8(KIND_GLOBAL);
  w.u8(I64);
  w.u8(1); // mutable
  return w;
}

/**
 * Writes the instrumented code section's content to `w`. With a call plan an escaping function's
 * entry becomes its wrapper, and its metered body follows all the original entries.
 */
function instrumentCode(module: Uint8Array, s: Section, info: ModuleInfo, calls: CallPlan | undefined, w: Writer): void {
  const r = sectionReader(module, s);
  const count = r.u32();
  if (count !== info.funcTypes.length) {
    throw new Error(`code section has ${count} bodies but the function section declares ${info.funcTypes.length}`);
  }
  const body = new BodyInstrumenter(info.importedGlobals, calls);
  const appended = new Writer(calls?.escaping ? 1 << 16 : 0);
  w.u32(count + (calls?.escaping ?? 0));
  for (let d = 0; d < count; d++) {
    const type = info.funcTypes[d]!;
    const params = info.types[type]?.params;
    if (params === undefined) throw new Error(`function ${d} has unknown type ${type}`);
    if (calls && info.escapes[d]) {
      calls.writeWrapper(w, d, info.importedGlobals);
      instrumentFunction(r, appended, body, params, calls.resultBlock(type));
    } else {
      instrumentFunction(r, w, body, params, calls?.resultBlock(type));
    }
  }
  w.copy(appended.buf, 0, appended.len);
}

/**
 * One code entry. With a call plan the counter is a parameter (`resultBlock` given); otherwise
 * the locals gain an i64 counter after all existing locals. A body with bulk operators also gains
 * an i32 scratch local, last.
 */
function instrumentFunction(r: Reader, w: Writer, body: BodyInstrumenter, params: number, resultBlock: Uint8Array | undefined): void {
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
  body.instrument(r.bytes, groupsEnd, end, params, locals, resultBlock);
  const sizeAt = w.beginSized();
  w.u32(groups + (resultBlock ? 0 : 1) + (body.usesScratch ? 1 : 0));
  w.copy(r.bytes, groupsStart, groupsEnd);
  if (!resultBlock) {
    w.u8(1); // one local of type i64: the counter
    w.u8(I64);
  }
  if (body.usesScratch) {
    w.u8(1); // one local of type i32, after the counter: a bulk operator's size
    w.u8(I32);
  }
  body.writeTo(w);
  w.endSized(sizeAt);
  r.pos = end;
}
