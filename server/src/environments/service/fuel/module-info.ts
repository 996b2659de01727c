import type { Reader } from "./leb.ts";
import {
  KIND_GLOBAL,
  SEC_FUNCTION,
  SEC_IMPORT,
  SEC_TYPE,
  sectionReader,
  skipImportDesc,
  type Section,
} from "./sections.ts";

/** What the code rewriter needs to know about the module before touching function bodies. */
export interface ModuleInfo {
  /** Parameter count per type index (parameters occupy the first local indices). */
  readonly typeParams: readonly number[];
  /** Type index of each defined function, in code-section order. */
  readonly funcTypes: readonly number[];
  readonly importedGlobals: number;
}

const encoder = new TextEncoder();

export function readModuleInfo(module: Uint8Array, sections: readonly Section[], fuelImport: { module: string; name: string }): ModuleInfo {
  const typeParams: number[] = [];
  const funcTypes: number[] = [];
  let importedGlobals = 0;
  const fuelModule = encoder.encode(fuelImport.module);
  const fuelName = encoder.encode(fuelImport.name);
  for (const s of sections) {
    const r = sectionReader(module, s);
    if (s.id === SEC_TYPE) readTypes(r, typeParams);
    else if (s.id === SEC_FUNCTION) for (let n = r.u32(); n > 0; n--) funcTypes.push(r.u32());
    else if (s.id === SEC_IMPORT) importedGlobals = countImportedGlobals(r, fuelModule, fuelName);
  }
  return { typeParams, funcTypes, importedGlobals };
}

function readTypes(r: Reader, typeParams: number[]): void {
  for (let n = r.u32(); n > 0; n--) {
    const form = r.u8();
    // GC type forms (rec, sub, struct, array) would change how type indices count; not supported.
    if (form !== 0x60) throw new Error(`unsupported type form 0x${form.toString(16)} at offset ${r.pos - 1}`);
    const params = r.u32();
    for (let i = 0; i < params; i++) r.skipValType();
    for (let results = r.u32(); results > 0; results--) r.skipValType();
    typeParams.push(params);
  }
}

/** Counts imported globals, refusing a module that already imports the fuel global (double metering). */
function countImportedGlobals(r: Reader, fuelModule: Uint8Array, fuelName: Uint8Array): number {
  let globals = 0;
  for (let n = r.u32(); n > 0; n--) {
    const moduleMatches = readNameEquals(r, fuelModule);
    const nameMatches = readNameEquals(r, fuelName);
    if (moduleMatches && nameMatches) throw new Error("module already imports the fuel global (instrumented twice?)");
    const kind = r.u8();
    skipImportDesc(r, kind);
    if (kind === KIND_GLOBAL) globals++;
  }
  return globals;
}

/** Consumes a name and reports whether it equals `expected`. */
function readNameEquals(r: Reader, expected: Uint8Array): boolean {
  const len = r.u32();
  const start = r.pos;
  r.skip(len);
  if (len !== expected.length) return false;
  for (let i = 0; i < len; i++) if (r.bytes[start + i] !== expected[i]) return false;
  return true;
}
