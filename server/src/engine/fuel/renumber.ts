/**
 * Rewrites the non-code sections that mention global indices. The fuel global is appended to the
 * imports, so imported globals keep their indices and every defined global moves up by one.
 */
import { GLOBAL_GET, Reader, Writer } from "../wasm/index.ts";
import type { CallPlan } from "./calls.ts";
import { KIND_GLOBAL, readTableInitPrefix, skipLimits, walkConstExpr } from "./sections.ts";

/** Maps an old global index to its index after the fuel import was added. */
export type GlobalMap = (index: number) => number;

export function shiftDefinedGlobals(importedGlobals: number): GlobalMap {
  return (index) => (index < importedGlobals ? index : index + 1);
}

/** Copies a constant expression, renumbering its global.get indices. */
function copyConstExpr(r: Reader, w: Writer, map: GlobalMap): void {
  let from = r.pos;
  walkConstExpr(r, (op, index, indexAt) => {
    if (op !== GLOBAL_GET) return;
    w.copy(r.bytes, from, indexAt);
    w.u32(map(index));
    from = r.pos;
  });
  w.copy(r.bytes, from, r.pos);
}

function copyValType(r: Reader, w: Writer): void {
  const start = r.pos;
  r.skipValType();
  w.copy(r.bytes, start, r.pos);
}

function copyName(r: Reader, w: Writer): void {
  const start = r.pos;
  r.skipVec();
  w.copy(r.bytes, start, r.pos);
}

export function rewriteGlobalSection(r: Reader, map: GlobalMap): Writer {
  const w = new Writer(r.end - r.pos + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    copyValType(r, w);
    w.u8(r.u8()); // mutability
    copyConstExpr(r, w, map);
  }
  return w;
}

export function rewriteExportSection(r: Reader, map: GlobalMap): Writer {
  const w = new Writer(r.end - r.pos + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    copyName(r, w);
    const kind = r.u8();
    w.u8(kind);
    const index = r.u32();
    w.u32(kind === KIND_GLOBAL ? map(index) : index);
  }
  return w;
}

/** Element segment flags: bit 0 passive/declarative, bit 1 explicit table (or declarative), bit 2 expression items. */
export function rewriteElementSection(r: Reader, map: GlobalMap): Writer {
  const w = new Writer(r.end - r.pos + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    const flags = r.u32();
    if (flags > 7) throw new Error(`unknown element segment flags ${flags} at offset ${r.pos}`);
    w.u32(flags);
    if ((flags & 1) === 0) {
      if (flags & 2) w.copyLeb(r); // table index
      copyConstExpr(r, w, map);
    }
    if (flags & 3) copyValType(r, w); // element kind byte or reference type
    for (let items = w.copyCount(r); items > 0; items--) {
      if (flags & 4) copyConstExpr(r, w, map);
      else w.copyLeb(r);
    }
  }
  return w;
}

export function rewriteDataSection(r: Reader, map: GlobalMap): Writer {
  const w = new Writer(r.end - r.pos + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    const flags = r.u32();
    if (flags > 2) throw new Error(`unknown data segment flags ${flags} at offset ${r.pos}`);
    w.u32(flags);
    if (flags === 2) w.copyLeb(r); // memory index
    if (flags !== 1) copyConstExpr(r, w, map);
    copyName(r, w); // payload: same length-prefixed layout as a name
  }
  return w;
}

/** Tables may carry an initialiser expression (sections.ts, readTableInitPrefix). */
export function rewriteTableSection(r: Reader, map: GlobalMap): Writer {
  const w = new Writer(r.end - r.pos + 16);
  for (let n = w.copyCount(r); n > 0; n--) {
    const start = r.pos;
    const withInit = readTableInitPrefix(r);
    r.skipValType();
    skipLimits(r);
    w.copy(r.bytes, start, r.pos);
    if (withInit) copyConstExpr(r, w, map);
  }
  return w;
}

const NAME_SUBSECTION_FUNCTIONS = 1;
const NAME_SUBSECTION_LOCALS = 2;
const NAME_SUBSECTION_LABELS = 3;
const NAME_SUBSECTION_GLOBALS = 7;

/**
 * The "name" custom section's global names (subsection 7) follow the renumbering. Label names
 * (subsection 3) are numbered by block order, which the inserted trap checks shift, so they are
 * dropped rather than left pointing at the wrong blocks; so are local names (subsection 2) when
 * the counter becomes a parameter (calls.ts) and shifts the locals. The metered body of an
 * escaping function takes its name (its wrapper keeps it too), so traps name the function. The
 * rest is copied.
 */
export function rewriteNameSection(r: Reader, map: GlobalMap, calls: CallPlan | undefined): Writer {
  const w = new Writer(r.end - r.pos + 16);
  copyName(r, w); // the custom section's own name, "name"
  while (r.pos < r.end) {
    const id = r.u8();
    const size = r.u32();
    const sub = new Reader(r.bytes, r.pos, r.pos + size);
    r.skip(size);
    if (id === NAME_SUBSECTION_LABELS || (id === NAME_SUBSECTION_LOCALS && calls)) continue;
    if (id === NAME_SUBSECTION_GLOBALS) w.section(id, renumberNames(sub, map));
    else if (id === NAME_SUBSECTION_FUNCTIONS && calls) w.section(id, nameBodies(sub, calls));
    else {
      w.u8(id);
      w.u32(size);
      w.copy(r.bytes, sub.pos, sub.end);
    }
  }
  return w;
}

function renumberNames(sub: Reader, map: GlobalMap): Writer {
  const names = new Writer(sub.end - sub.pos + 16);
  for (let count = names.copyCount(sub); count > 0; count--) {
    names.u32(map(sub.u32()));
    copyName(sub, names);
  }
  return names;
}

/** Function names, plus one per appended body; both lists ascend, as the section requires. */
function nameBodies(sub: Reader, calls: CallPlan): Writer {
  const original = new Writer(sub.end - sub.pos);
  const appended = new Writer(64);
  let added = 0;
  const count = sub.u32();
  for (let n = count; n > 0; n--) {
    const index = sub.u32();
    const nameStart = sub.pos;
    sub.skipVec();
    original.u32(index);
    original.copy(sub.bytes, nameStart, sub.pos);
    const body = calls.target(index);
    if (body >= 0 && body !== index) {
      appended.u32(body);
      appended.copy(sub.bytes, nameStart, sub.pos);
      added++;
    }
  }
  const names = new Writer(original.len + appended.len + 8);
  names.u32(count + added);
  names.copy(original.buf, 0, original.len);
  names.copy(appended.buf, 0, appended.len);
  return names;
}
