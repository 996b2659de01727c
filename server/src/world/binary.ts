/**
 * Reads the top-level import and export names of a WebAssembly component (component model
 * binary format, design/mvp/Binary.md). Only the preamble and the import (10) and export (11)
 * sections are decoded; every other section is skipped by its length, so a 12 MB component
 * takes well under a millisecond and the event loop is never held. Everything else (types,
 * core code) is validated when the component is compiled during preparation.
 */

/** The extern sorts of the component model, by their binary discriminant. */
export type ExternSort = "module" | "func" | "value" | "type" | "component" | "instance";

export interface ExternName {
  name: string;
  sort: ExternSort;
  /** Type imports only: `eq` aliases a type defined elsewhere; `sub-resource` asks for a new resource. */
  bound?: "eq" | "sub-resource";
}

export interface ComponentSections {
  imports: ExternName[];
  exports: ExternName[];
}

/** The bytes are not a component this reader accepts; the message says why, for the caller. */
export class ComponentFormatError extends Error {
  override name = "ComponentFormatError";
}

const MAGIC = [0x00, 0x61, 0x73, 0x6d];
/** The pre-standard binary version that current toolchains (wasm-tools, jco, componentize-js) emit. */
const COMPONENT_VERSION = [0x0d, 0x00];
const LAYER_COMPONENT = [0x01, 0x00];
const LAYER_CORE = [0x00, 0x00];
const SECTION_IMPORT = 10;
const SECTION_EXPORT = 11;
const SORTS: readonly ExternSort[] = ["module", "func", "value", "type", "component", "instance"];
/** The second byte of the core sort `module`, the only core sort a component may import or export. */
const CORE_SORT_MODULE = 0x11;

export function readComponentSections(bytes: Uint8Array): ComponentSections {
  checkPreamble(bytes);
  const reader = new Reader(bytes, 8);
  const sections: ComponentSections = { imports: [], exports: [] };
  while (!reader.done()) {
    const id = reader.byte();
    const end = reader.sectionEnd();
    if (id === SECTION_IMPORT) readVector(reader, end, () => sections.imports.push(readImport(reader)));
    else if (id === SECTION_EXPORT) readVector(reader, end, () => sections.exports.push(readExport(reader)));
    reader.seek(end);
  }
  return sections;
}

function checkPreamble(bytes: Uint8Array): void {
  const at = (offset: number, expected: number[]) => expected.every((byte, i) => bytes[offset + i] === byte);
  if (bytes.byteLength < 8 || !at(0, MAGIC)) throw new ComponentFormatError("not WebAssembly (no \\0asm preamble)");
  if (at(4, [0x01, 0x00]) && at(6, LAYER_CORE)) {
    throw new ComponentFormatError("a core WebAssembly module, not a component; wrap it into a component (e.g. jco new or wasm-tools component new)");
  }
  if (!at(6, LAYER_COMPONENT)) throw new ComponentFormatError("unknown WebAssembly layer; expected a component");
  if (!at(4, COMPONENT_VERSION)) throw new ComponentFormatError(`unsupported component binary version 0x${bytes[4]!.toString(16)}; rebuild with a current toolchain`);
}

/** A section's vector must account for exactly the section's bytes. */
function readVector(reader: Reader, end: number, readItem: () => void): void {
  const count = reader.u32();
  for (let i = 0; i < count; i++) readItem();
  if (reader.position !== end) throw new ComponentFormatError("a section's contents do not match its length");
}

/** import ::= importname' externdesc */
function readImport(reader: Reader): ExternName {
  const name = readExternName(reader);
  return { name, ...readExternDesc(reader) };
}

/** export ::= exportname' sortidx (0x00 | 0x01 externdesc) */
function readExport(reader: Reader): ExternName {
  const name = readExternName(reader);
  const sort = readSort(reader);
  reader.u32();
  const ascribed = reader.byte();
  if (ascribed === 0x01) readExternDesc(reader);
  else if (ascribed !== 0x00) throw new ComponentFormatError("malformed export");
  return { name, sort };
}

/** 0x00 name; binaries from before component-model#263 used 0x01 for interface names. */
function readExternName(reader: Reader): string {
  const tag = reader.byte();
  if (tag !== 0x00 && tag !== 0x01) throw new ComponentFormatError("malformed import or export name");
  return reader.string();
}

function readSort(reader: Reader): ExternSort {
  const tag = reader.byte();
  if (tag === 0x00 && reader.byte() !== CORE_SORT_MODULE) throw new ComponentFormatError("malformed extern sort");
  const sort = SORTS[tag];
  if (sort === undefined) throw new ComponentFormatError("malformed extern sort");
  return sort;
}

/** externdesc ::= sort-tag payload; the payload is an index, a value type or a type bound. */
function readExternDesc(reader: Reader): Pick<ExternName, "sort" | "bound"> {
  const sort = readSort(reader);
  if (sort !== "type") {
    // A type index, or for values a valtype: a type index or a one-byte primitive, both LEB128.
    reader.u32();
    return { sort };
  }
  // typebound ::= 0x00 typeidx (eq) | 0x01 (sub resource)
  const bound = reader.byte();
  if (bound === 0x01) return { sort, bound: "sub-resource" };
  if (bound !== 0x00) throw new ComponentFormatError("malformed type bound");
  reader.u32();
  return { sort, bound: "eq" };
}

class Reader {
  readonly #bytes: Uint8Array;
  #position: number;

  constructor(bytes: Uint8Array, position: number) {
    this.#bytes = bytes;
    this.#position = position;
  }

  get position(): number {
    return this.#position;
  }

  done(): boolean {
    return this.#position >= this.#bytes.byteLength;
  }

  seek(position: number): void {
    this.#position = position;
  }

  byte(): number {
    const value = this.#bytes[this.#position];
    if (value === undefined) throw new ComponentFormatError("truncated component");
    this.#position += 1;
    return value;
  }

  /** Unsigned LEB128 of at most 5 bytes (32 bits). */
  u32(): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = this.byte();
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) {
        if (value > 0xffffffff) break;
        return value;
      }
    }
    throw new ComponentFormatError("malformed LEB128 integer");
  }

  /** The end offset of a section whose size comes next; it must lie within the bytes. */
  sectionEnd(): number {
    const size = this.u32();
    const end = this.#position + size;
    if (end > this.#bytes.byteLength) throw new ComponentFormatError("truncated component");
    return end;
  }

  string(): string {
    const length = this.u32();
    const end = this.#position + length;
    if (end > this.#bytes.byteLength) throw new ComponentFormatError("truncated component");
    const text = this.#bytes.subarray(this.#position, end);
    this.#position = end;
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(text);
    } catch {
      throw new ComponentFormatError("an import or export name is not UTF-8");
    }
  }
}
