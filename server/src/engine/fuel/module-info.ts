import { FUNC_TYPE_FORM, REF_FUNC, type Reader } from "../wasm/index.ts";
import {
  KIND_FUNC,
  KIND_GLOBAL,
  readNameEquals,
  readTableInitPrefix,
  SEC_ELEMENT,
  SEC_EXPORT,
  SEC_FUNCTION,
  SEC_GLOBAL,
  SEC_IMPORT,
  SEC_MEMORY,
  SEC_START,
  SEC_TABLE,
  SEC_TYPE,
  sectionReader,
  skipImportDesc,
  skipLimits,
  type Section,
  walkConstExpr,
} from "./sections.ts";

/** A function type as the byte ranges of its parameter and result lists (for deriving new types). */
export interface FuncType {
  readonly params: number;
  readonly results: number;
  /** [start, end) of the parameter value types, after their count. */
  readonly paramBytes: readonly [number, number];
  readonly resultBytes: readonly [number, number];
}

/** What the code rewriter needs to know about the module before touching function bodies. */
export interface ModuleInfo {
  readonly types: readonly FuncType[];
  /** Type index of each defined function, in code-section order. */
  readonly funcTypes: readonly number[];
  readonly importedFuncs: number;
  readonly importedGlobals: number;
  /**
   * Per defined function, 1 when something outside direct calls can reach it: an export, an
   * element segment (tables, and the declarations `ref.func` needs), a global or table
   * initialiser, the start function. Such a function keeps its type at its index.
   */
  readonly escapes: Uint8Array;
}

const encoder = new TextEncoder();

export function readModuleInfo(module: Uint8Array, sections: readonly Section[], fuelImport: { module: string; name: string }): ModuleInfo {
  const types: FuncType[] = [];
  const funcTypes: number[] = [];
  const imports = { funcs: 0, globals: 0 };
  const escaping: number[] = [];
  const fuelModule = encoder.encode(fuelImport.module);
  const fuelName = encoder.encode(fuelImport.name);
  for (const s of sections) {
    const r = sectionReader(module, s);
    if (s.id === SEC_TYPE) readTypes(r, types);
    else if (s.id === SEC_FUNCTION) for (let n = r.u32(); n > 0; n--) funcTypes.push(r.u32());
    else if (s.id === SEC_IMPORT) countImports(r, fuelModule, fuelName, imports);
    else if (s.id === SEC_EXPORT) readExportedFuncs(r, escaping);
    else if (s.id === SEC_ELEMENT) readElementFuncs(r, escaping);
    else if (s.id === SEC_GLOBAL) readGlobalFuncRefs(r, escaping);
    else if (s.id === SEC_TABLE) readTableFuncRefs(r, escaping);
    else if (s.id === SEC_MEMORY)
      for (let n = r.u32(); n > 0; n--) skipLimits(r); // refuses memory64
    else if (s.id === SEC_START) escaping.push(r.u32());
  }
  const escapes = new Uint8Array(funcTypes.length);
  for (const index of escaping) if (index >= imports.funcs) escapes[index - imports.funcs] = 1;
  return { types, funcTypes, importedFuncs: imports.funcs, importedGlobals: imports.globals, escapes };
}

function readTypes(r: Reader, types: FuncType[]): void {
  for (let n = r.u32(); n > 0; n--) {
    const form = r.u8();
    // GC type forms (rec, sub, struct, array) would change how type indices count; not supported.
    if (form !== FUNC_TYPE_FORM) throw new Error(`unsupported type form 0x${form.toString(16)} at offset ${r.pos - 1}`);
    const params = r.u32();
    const paramStart = r.pos;
    for (let i = 0; i < params; i++) r.skipValType();
    const paramEnd = r.pos;
    const results = r.u32();
    const resultStart = r.pos;
    for (let i = 0; i < results; i++) r.skipValType();
    types.push({ params, results, paramBytes: [paramStart, paramEnd], resultBytes: [resultStart, r.pos] });
  }
}

/** Counts imported functions and globals, refusing a module that already imports the fuel global (double metering). */
function countImports(r: Reader, fuelModule: Uint8Array, fuelName: Uint8Array, counts: { funcs: number; globals: number }): void {
  for (let n = r.u32(); n > 0; n--) {
    const moduleMatches = readNameEquals(r, fuelModule);
    const nameMatches = readNameEquals(r, fuelName);
    if (moduleMatches && nameMatches) throw new Error("module already imports the fuel global (instrumented twice?)");
    const kind = r.u8();
    skipImportDesc(r, kind);
    if (kind === KIND_GLOBAL) counts.globals++;
    else if (kind === KIND_FUNC) counts.funcs++;
  }
}

function readExportedFuncs(r: Reader, into: number[]): void {
  for (let n = r.u32(); n > 0; n--) {
    r.skipVec();
    const kind = r.u8();
    const index = r.u32();
    if (kind === KIND_FUNC) into.push(index);
  }
}

/** Element segment flags: bit 0 passive/declarative, bit 1 explicit table (or declarative), bit 2 expression items. */
function readElementFuncs(r: Reader, into: number[]): void {
  for (let n = r.u32(); n > 0; n--) {
    const flags = r.u32();
    if (flags > 7) throw new Error(`unknown element segment flags ${flags} at offset ${r.pos}`);
    if ((flags & 1) === 0) {
      if (flags & 2) r.skipLeb(); // table index
      readConstExprFuncs(r, into);
    }
    if (flags & 3) r.skipValType(); // element kind byte or reference type
    for (let items = r.u32(); items > 0; items--) {
      if (flags & 4) readConstExprFuncs(r, into);
      else into.push(r.u32());
    }
  }
}

function readGlobalFuncRefs(r: Reader, into: number[]): void {
  for (let n = r.u32(); n > 0; n--) {
    r.skipValType();
    r.u8(); // mutability
    readConstExprFuncs(r, into);
  }
}

function readTableFuncRefs(r: Reader, into: number[]): void {
  for (let n = r.u32(); n > 0; n--) {
    const withInit = readTableInitPrefix(r);
    r.skipValType();
    skipLimits(r);
    if (withInit) readConstExprFuncs(r, into);
  }
}

/** The functions a constant expression takes a reference to (`ref.func`). */
function readConstExprFuncs(r: Reader, into: number[]): void {
  walkConstExpr(r, (op, index) => {
    if (op === REF_FUNC) into.push(index);
  });
}
