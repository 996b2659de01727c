/**
 * Reads what a WebAssembly component imports and exports, with the types of its functions
 * (component model binary format, design/mvp/Binary.md). The sections that shape the component's
 * surface (types, aliases, canonical definitions, instances, nested components, imports and
 * exports) are decoded; core modules, core instances and custom sections are skipped by their
 * length, so a 12 MB componentize-js component takes well under a millisecond and the event loop
 * is never held. Core code is validated when the component is compiled during preparation.
 *
 * Types are rendered as text close to WIT, without parameter names (calls are positional):
 * `func(string, u64) -> result<string, record { code: string, message: string }>`. Comparing
 * that text is comparing the types; a type too large to render is shown as TOO_LARGE.
 */
import {
  bytesAt,
  COMPONENT_LAYER,
  COMPONENT_VERSION,
  CORE_MODULE_PREAMBLE,
  I32,
  LAYER_AT,
  plainBytes,
  PREAMBLE_BYTES,
  Reader,
  VERSION_AT,
  WASM_MAGIC,
  type BinaryFault,
} from "../wasm/index.ts";

/** The extern sorts of the component model, by their binary discriminant. */
export type ExternSort = "module" | "func" | "value" | "type" | "component" | "instance";

export interface ExternName {
  name: string;
  sort: ExternSort;
  /** Functions: the function's type. */
  type?: string;
  /** Types: `eq` aliases a type defined elsewhere; `sub-resource` asks for a new resource. */
  bound?: "eq" | "sub-resource";
  /** Instances: what the instance exports. */
  exports?: ExternName[];
}

export interface ComponentSections {
  imports: ExternName[];
  exports: ExternName[];
}

/** The bytes are not a component this reader accepts; the message says why, for the caller. */
export class ComponentFormatError extends Error {
  override name = "ComponentFormatError";
}

/** How a type longer than MAX_TYPE_TEXT characters is shown (it matches no expected type). */
export const TOO_LARGE = "<a type too large to show>";
const MAX_TYPE_TEXT = 512;
/** Nesting of components and of component and instance types; deeper is refused. */
const MAX_DEPTH = 32;

const SECTION = { component: 4, instance: 5, alias: 6, type: 7, canon: 8, import: 10, export: 11 } as const;
const SORTS: readonly ExternSort[] = ["module", "func", "value", "type", "component", "instance"];
/** The core sorts (design/mvp/Binary.md core:sort): func, table, memory, global, type, module, instance. */
const CORE_SORTS: ReadonlySet<number> = new Set([0x00, 0x01, 0x02, 0x03, 0x10, 0x11, 0x12]);

const PRIMITIVES: Readonly<Record<number, string>> = {
  0x7f: "bool",
  0x7e: "s8",
  0x7d: "u8",
  0x7c: "s16",
  0x7b: "u16",
  0x7a: "s32",
  0x79: "u32",
  0x78: "s64",
  0x77: "u64",
  0x76: "f32",
  0x75: "f64",
  0x74: "char",
  0x73: "string",
  0x64: "error-context",
};

/** An entry of a type index space. */
type Type =
  | { kind: "value"; text: string }
  | { kind: "resource"; text: string }
  | { kind: "func"; text: string }
  | { kind: "instance" | "component"; instance: Instance };

/** An item of an index space as imports, exports and aliases carry it. */
interface Entry {
  item: ExternName;
  /** Types: the type the item stands for. */
  type?: Type;
  /** Instances and components: their exports. */
  instance?: Instance;
}

/** An instance (or what instantiating a component gives): its exports, in order and by name. */
interface Instance {
  exports: ExternName[];
  entries: Map<string, Entry>;
}

function newInstance(): Instance {
  return { exports: [], entries: new Map() };
}

function addExport(instance: Instance, entry: Entry): void {
  instance.exports.push(entry.item);
  instance.entries.set(entry.item.name, entry);
}

/** The index spaces of one component, or of one component or instance type being declared. */
class Scope {
  readonly parent: Scope | undefined;
  readonly depth: number;
  readonly types: Type[] = [];
  readonly funcs: string[] = [];
  readonly instances: Instance[] = [];
  readonly components: Instance[] = [];
  /** What a component, or an instance or component type, exports. */
  readonly exports: Instance = newInstance();

  constructor(parent: Scope | undefined) {
    this.parent = parent;
    this.depth = parent ? parent.depth + 1 : 0;
    if (this.depth > MAX_DEPTH) throw new ComponentFormatError(`components or types nested more than ${MAX_DEPTH} deep`);
  }

  type(index: number): Type {
    return at(this.types, index, "type");
  }

  /** The scope `count` levels out (outer aliases). */
  outer(count: number): Scope {
    let scope: Scope = this;
    for (let i = 0; i < count; i++) {
      if (!scope.parent) throw new ComponentFormatError("an outer alias reaches beyond the outermost component");
      scope = scope.parent;
    }
    return scope;
  }
}

export function readComponentSections(input: Uint8Array): ComponentSections {
  const bytes = plainBytes(input);
  const reader = new Reader(bytes, 0, bytes.byteLength, componentFault);
  const imports: ExternName[] = [];
  const scope = readComponent(reader, bytes.byteLength, undefined, imports);
  return { imports, exports: scope.exports.exports };
}

/** component ::= preamble section*; `imports` collects the top-level imports when given. */
function readComponent(reader: Reader, end: number, parent: Scope | undefined, imports?: ExternName[]): Scope {
  checkPreamble(reader.bytes.subarray(reader.pos, end));
  reader.pos += PREAMBLE_BYTES;
  const scope = new Scope(parent);
  while (reader.pos < end) {
    const id = reader.u8();
    const sectionEnd = readSectionEnd(reader, end);
    readSection(reader, id, sectionEnd, scope, imports ?? []);
    if (reader.pos !== sectionEnd) throw new ComponentFormatError("a section's contents do not match its length");
  }
  return scope;
}

function checkPreamble(bytes: Uint8Array): void {
  if (bytes.byteLength < PREAMBLE_BYTES || !bytesAt(bytes, 0, WASM_MAGIC)) throw new ComponentFormatError("not WebAssembly (no \\0asm preamble)");
  if (bytesAt(bytes, 0, CORE_MODULE_PREAMBLE)) {
    throw new ComponentFormatError("a core WebAssembly module, not a component; wrap it into a component (e.g. jco new or wasm-tools component new)");
  }
  if (!bytesAt(bytes, LAYER_AT, COMPONENT_LAYER)) throw new ComponentFormatError("unknown WebAssembly layer; expected a component");
  if (!bytesAt(bytes, VERSION_AT, COMPONENT_VERSION)) {
    throw new ComponentFormatError(`unsupported component binary version 0x${bytes[VERSION_AT]!.toString(16)}; rebuild with a current toolchain`);
  }
}

function readSection(reader: Reader, id: number, end: number, scope: Scope, imports: ExternName[]): void {
  const each = (read: () => void) => {
    for (let count = reader.u32(); count > 0; count--) read();
  };
  switch (id) {
    case SECTION.component:
      scope.components.push(readComponent(reader, end, scope).exports);
      return;
    case SECTION.instance:
      return each(() => scope.instances.push(readInstance(reader, scope)));
    case SECTION.alias:
      return each(() => readAlias(reader, scope));
    case SECTION.type:
      return each(() => scope.types.push(readDefType(reader, scope)));
    case SECTION.canon:
      return each(() => readCanon(reader, scope));
    case SECTION.import:
      return each(() => imports.push(declare(reader, scope).item));
    case SECTION.export:
      return each(() => addExport(scope.exports, readExport(reader, scope)));
    default:
      // Custom sections, core modules, core instances, core types and the start function.
      reader.pos = end;
  }
}

/** instance ::= 0x00 componentidx vec(instantiatearg) | 0x01 vec(inlineexport) */
function readInstance(reader: Reader, scope: Scope): Instance {
  const form = reader.u8();
  if (form === 0x00) {
    const component = at(scope.components, reader.u32(), "component");
    for (let count = reader.u32(); count > 0; count--) {
      readName(reader);
      readSortIndex(reader);
    }
    return component;
  }
  if (form !== 0x01) throw new ComponentFormatError("malformed instance");
  const instance = newInstance();
  for (let count = reader.u32(); count > 0; count--) {
    const name = readExternName(reader);
    const { sort, index } = readSortIndex(reader);
    addExport(instance, describeIndexed(scope, name, sort, index));
  }
  return instance;
}

/** alias ::= sort (0x00 instanceidx name | 0x01 core:instanceidx name | 0x02 count idx) */
function readAlias(reader: Reader, scope: Scope): void {
  const sort = readSort(reader);
  const target = reader.u8();
  if (target === 0x00) {
    const instance = at(scope.instances, reader.u32(), "instance");
    const name = readName(reader);
    const entry = instance.entries.get(name);
    if (entry?.item.sort !== sort) throw new ComponentFormatError(`an alias names ${sort} ${name}, which its instance does not export`);
    addIndexed(scope, entry);
  } else if (target === 0x01) {
    if (sort !== "core") throw new ComponentFormatError("malformed alias");
    reader.u32();
    readName(reader);
  } else if (target === 0x02) {
    const outer = scope.outer(reader.u32());
    const index = reader.u32();
    if (sort === "type") scope.types.push(outer.type(index));
    else if (sort === "component") scope.components.push(at(outer.components, index, "component"));
    else if (sort !== "module") throw new ComponentFormatError(`an outer alias of a ${sort}`);
  } else {
    throw new ComponentFormatError("malformed alias");
  }
}

/** Adds an imported, aliased or exported item to the scope's index space of its sort. */
function addIndexed(scope: Scope, { item, type, instance }: Entry): void {
  if (item.sort === "func") scope.funcs.push(item.type ?? TOO_LARGE);
  else if (item.sort === "type") scope.types.push(type ?? { kind: "value", text: TOO_LARGE });
  else if (item.sort === "instance") scope.instances.push(instance ?? newInstance());
  else if (item.sort === "component") scope.components.push(instance ?? newInstance());
}

/** What index `index` of the scope stands for, named `name` (inline exports, exports). */
function describeIndexed(scope: Scope, name: string, sort: ExternSort | "core", index: number): Entry {
  switch (sort) {
    case "func":
      return { item: { name, sort, type: at(scope.funcs, index, "function") } };
    case "type":
      return { item: { name, sort, bound: "eq" }, type: scope.type(index) };
    case "instance":
    case "component": {
      const instance = at(sort === "instance" ? scope.instances : scope.components, index, sort);
      return { item: { name, sort, exports: instance.exports }, instance };
    }
    case "core":
      return { item: { name, sort: "module" } };
    default:
      return { item: { name, sort } };
  }
}

/** export ::= exportname sortidx (0x00 | 0x01 externdesc); an export adds an index of its sort. */
function readExport(reader: Reader, scope: Scope): Entry {
  const name = readExternName(reader);
  const { sort, index } = readSortIndex(reader);
  const entry = describeIndexed(scope, name, sort, index);
  const ascribed = reader.u8();
  if (ascribed === 0x01) readExternDesc(reader, scope, name);
  else if (ascribed !== 0x00) throw new ComponentFormatError("malformed export");
  addIndexed(scope, entry);
  return entry;
}

/** importdecl or exportdecl: name externdesc, added to the scope's index space of its sort. */
function declare(reader: Reader, scope: Scope): Entry {
  const entry = readExternDesc(reader, scope, readExternName(reader));
  addIndexed(scope, entry);
  return entry;
}

/** externdesc ::= sort payload: a type index or a type bound. */
function readExternDesc(reader: Reader, scope: Scope, name: string): Entry {
  const sort = readSort(reader);
  switch (sort) {
    case "core":
      reader.u32();
      return { item: { name, sort: "module" } };
    case "func": {
      const type = scope.type(reader.u32());
      if (type.kind !== "func") throw new ComponentFormatError(`${name} is declared a function of a type that is not a function type`);
      return { item: { name, sort, type: type.text } };
    }
    case "instance":
    case "component": {
      const type = scope.type(reader.u32());
      if (type.kind !== sort) throw new ComponentFormatError(`${name} is declared ${sort} of a type that is not ${sort} type`);
      return { item: { name, sort, exports: type.instance.exports }, instance: type.instance };
    }
    case "type": {
      // typebound ::= 0x00 typeidx (eq) | 0x01 (sub resource)
      const bound = reader.u8();
      if (bound === 0x01) return { item: { name, sort, bound: "sub-resource" }, type: { kind: "resource", text: name } };
      if (bound !== 0x00) throw new ComponentFormatError("malformed type bound");
      return { item: { name, sort, bound: "eq" }, type: scope.type(reader.u32()) };
    }
    default:
      throw new ComponentFormatError(`${name} is a value import or export, which the service environment does not support`);
  }
}

/** deftype ::= defvaltype | functype | componenttype | instancetype | resourcetype */
function readDefType(reader: Reader, scope: Scope): Type {
  const form = reader.peek();
  switch (form) {
    case 0x40:
    case 0x43:
      reader.u8();
      return { kind: "func", text: readFuncType(reader, scope, form === 0x43) };
    case 0x41:
    case 0x42:
      reader.u8();
      return { kind: form === 0x41 ? "component" : "instance", instance: readDeclarations(reader, scope, form === 0x41).exports };
    case 0x3f:
      // resourcetype ::= 0x3f 0x7f (0x00 | 0x01 funcidx): an i32 representation, an optional destructor.
      reader.u8();
      if (reader.u8() !== I32) throw new ComponentFormatError("malformed resource type");
      if (reader.u8() === 0x01) reader.u32();
      return { kind: "resource", text: "resource" };
    default:
      return { kind: "value", text: readDefValType(reader, scope) };
  }
}

/** The declarations of a component (0x41) or instance (0x42) type, in a scope of their own. */
function readDeclarations(reader: Reader, parent: Scope, component: boolean): Scope {
  const scope = new Scope(parent);
  for (let count = reader.u32(); count > 0; count--) {
    const form = reader.u8();
    if (form === 0x01) scope.types.push(readDefType(reader, scope));
    else if (form === 0x02) readAlias(reader, scope);
    else if (form === 0x04) addExport(scope.exports, declare(reader, scope));
    else if (form === 0x03 && component) declare(reader, scope);
    else if (form === 0x00) throw new ComponentFormatError("a core type inside a component or instance type, which the service environment does not support");
    else throw new ComponentFormatError("malformed type declaration");
  }
  return scope;
}

/** functype ::= 0x40 vec(label valtype) (0x00 valtype | 0x01 vec(label valtype)) */
function readFuncType(reader: Reader, scope: Scope, async: boolean): string {
  const params = new TypeText();
  for (let count = reader.u32(); count > 0; count--) {
    readName(reader);
    params.add(readValType(reader, scope));
  }
  const results = new TypeText();
  if (reader.u8() === 0x00) results.add(readValType(reader, scope));
  else {
    for (let count = reader.u32(); count > 0; count--) {
      readName(reader);
      results.add(readValType(reader, scope));
    }
  }
  const signature = wrap(async ? "async func(" : "func(", params.join(", "), ")");
  if (results.count === 0 || signature === TOO_LARGE) return signature;
  return wrap(`${signature} -> `, results.count === 1 ? results.join("") : `(${results.join(", ")})`, "");
}

/** valtype ::= typeidx | primvaltype: a primitive is a one-byte negative SLEB128, an index is not. */
function readValType(reader: Reader, scope: Scope): string {
  const first = reader.peek();
  if (first >= 0x40 && first < 0x80) {
    reader.u8();
    const primitive = PRIMITIVES[first];
    if (primitive === undefined) throw new ComponentFormatError(`unknown value type 0x${first.toString(16)}`);
    return primitive;
  }
  const type = scope.type(reader.u32());
  if (type.kind !== "value" && type.kind !== "resource") throw new ComponentFormatError("a value type refers to a type that is not a value type");
  return type.text;
}

function readOptionalValType(reader: Reader, scope: Scope): string | undefined {
  const present = reader.u8();
  if (present === 0x00) return undefined;
  if (present !== 0x01) throw new ComponentFormatError("malformed optional type");
  return readValType(reader, scope);
}

function readDefValType(reader: Reader, scope: Scope): string {
  const form = reader.u8();
  const primitive = PRIMITIVES[form];
  if (primitive !== undefined) return primitive;
  const list = (item: () => string) => {
    const text = new TypeText();
    for (let count = reader.u32(); count > 0; count--) text.add(item());
    return text.join(", ");
  };
  const valType = () => readValType(reader, scope);
  switch (form) {
    case 0x72:
      return wrap(
        "record { ",
        list(() => `${readName(reader)}: ${valType()}`),
        " }",
      );
    case 0x71:
      return wrap(
        "variant { ",
        list(() => readCase(reader, scope)),
        " }",
      );
    case 0x70:
      return wrap("list<", valType(), ">");
    case 0x67:
      return wrap("list<", valType(), `, ${reader.u32()}>`);
    case 0x6f:
      return wrap("tuple<", list(valType), ">");
    case 0x6e:
      return wrap(
        "flags { ",
        list(() => readName(reader)),
        " }",
      );
    case 0x6d:
      return wrap(
        "enum { ",
        list(() => readName(reader)),
        " }",
      );
    case 0x6b:
      return wrap("option<", valType(), ">");
    case 0x6a: {
      const ok = readOptionalValType(reader, scope);
      const error = readOptionalValType(reader, scope);
      if (error !== undefined) return wrap("result<", `${ok ?? "_"}, ${error}`, ">");
      return ok === undefined ? "result" : wrap("result<", ok, ">");
    }
    case 0x69:
    case 0x68:
      return wrap(form === 0x69 ? "own<" : "borrow<", resourceText(scope.type(reader.u32())), ">");
    case 0x66:
    case 0x65: {
      const element = readOptionalValType(reader, scope);
      const kind = form === 0x66 ? "stream" : "future";
      return element === undefined ? kind : wrap(`${kind}<`, element, ">");
    }
    default:
      throw new ComponentFormatError(`unknown type form 0x${form.toString(16)}`);
  }
}

/** case ::= label valtype? (0x00 | 0x01 u32): the refinement of early binaries is skipped. */
function readCase(reader: Reader, scope: Scope): string {
  const name = readName(reader);
  const payload = readOptionalValType(reader, scope);
  if (reader.u8() === 0x01) reader.u32();
  return payload === undefined ? name : `${name}(${payload})`;
}

function resourceText(type: Type): string {
  if (type.kind !== "resource") throw new ComponentFormatError("own or borrow of a type that is not a resource");
  return type.text;
}

/**
 * canon ::= 0x00 0x00 core:funcidx opts typeidx (lift: a function of that type) | 0x01 0x00
 * funcidx opts (lower) | 0x02-0x04, 0x07 typeidx (resource built-ins). The asynchronous
 * built-ins are refused: jco's glue and the host's entrypoints are synchronous.
 */
function readCanon(reader: Reader, scope: Scope): void {
  const op = reader.u8();
  if (op === 0x00 || op === 0x01) {
    if (reader.u8() !== 0x00) throw new ComponentFormatError("malformed canonical definition");
    reader.u32();
    readCanonOptions(reader);
    if (op === 0x01) return;
    const type = scope.type(reader.u32());
    if (type.kind !== "func") throw new ComponentFormatError("a lifted function whose type is not a function type");
    scope.funcs.push(type.text);
  } else if (op === 0x02 || op === 0x03 || op === 0x04 || op === 0x07) {
    reader.u32();
  } else {
    throw new ComponentFormatError(`canonical built-in 0x${op.toString(16)} (asynchronous components) is not supported by the service environment`);
  }
}

/** canonopt ::= 0x00-0x02 (string encodings) | 0x03-0x05 index (memory, realloc, post-return) | 0x06 (async) | 0x07 index (callback) */
function readCanonOptions(reader: Reader): void {
  for (let count = reader.u32(); count > 0; count--) {
    const option = reader.u8();
    if (option === 0x03 || option === 0x04 || option === 0x05 || option === 0x07) reader.u32();
    else if (option > 0x07) throw new ComponentFormatError(`unknown canonical option 0x${option.toString(16)}`);
  }
}

/** 0x00 name; binaries from before component-model#263 used 0x01 for interface names. */
function readExternName(reader: Reader): string {
  const tag = reader.u8();
  if (tag !== 0x00 && tag !== 0x01) throw new ComponentFormatError("malformed import or export name");
  return readName(reader);
}

/** sort ::= 0x00 core:sort | 0x01 func | 0x02 value | 0x03 type | 0x04 component | 0x05 instance */
function readSort(reader: Reader): ExternSort | "core" {
  const tag = reader.u8();
  if (tag === 0x00) {
    if (!CORE_SORTS.has(reader.u8())) throw new ComponentFormatError("malformed core sort");
    return "core";
  }
  const sort = SORTS[tag];
  if (sort === undefined) throw new ComponentFormatError("malformed extern sort");
  return sort;
}

function readSortIndex(reader: Reader): { sort: ExternSort | "core"; index: number } {
  const sort = readSort(reader);
  return { sort, index: reader.u32() };
}

function at<T>(space: readonly T[], index: number, what: string): T {
  const item = space[index];
  if (item === undefined) throw new ComponentFormatError(`${what} index ${index} is out of range`);
  return item;
}

/** A type's text around `inner`: TOO_LARGE when `inner` is, or when longer than MAX_TYPE_TEXT. */
function wrap(prefix: string, inner: string, suffix: string): string {
  if (inner === TOO_LARGE || prefix.length + inner.length + suffix.length > MAX_TYPE_TEXT) return TOO_LARGE;
  return `${prefix}${inner}${suffix}`;
}

/** Parts of a type's text, joined only while they fit (a crafted type stays cheap to render). */
class TypeText {
  readonly #parts: string[] = [];
  #length = 0;
  count = 0;

  add(part: string): void {
    this.count++;
    this.#length += part === TOO_LARGE ? MAX_TYPE_TEXT + 1 : part.length + 2;
    if (this.#length <= MAX_TYPE_TEXT) this.#parts.push(part);
  }

  join(separator: string): string {
    return this.#length > MAX_TYPE_TEXT ? TOO_LARGE : this.#parts.join(separator);
  }
}

/** The shared reader's faults as admission words them (callers report them as invalid_component). */
function componentFault(fault: BinaryFault): ComponentFormatError {
  return new ComponentFormatError(fault === "truncated" ? "truncated component" : "malformed LEB128 integer");
}

/** The end offset of a section whose size comes next; it must lie within `limit`. */
function readSectionEnd(reader: Reader, limit: number): number {
  const size = reader.u32();
  const end = reader.pos + size;
  if (end > limit) throw new ComponentFormatError("truncated component");
  return end;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** name ::= len:u32 bytes, UTF-8. */
function readName(reader: Reader): string {
  const length = reader.u32();
  const start = reader.pos;
  reader.skip(length);
  try {
    return utf8.decode(reader.bytes.subarray(start, reader.pos));
  } catch {
    throw new ComponentFormatError("a name is not UTF-8");
  }
}
