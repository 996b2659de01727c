import { toBinary, type DescExtension, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

/**
 * The files declaring a set of services and of other messages a client meets (error details),
 * with every file they import, indexed the ways gRPC server reflection looks them up: by file
 * name, by the fully-qualified name of anything they declare, and by extension. The descriptors
 * are the generated ones (gen/), which carry no comments.
 */
export class DescriptorIndex {
  /** The services' fully-qualified names, as list_services reports them. */
  readonly serviceNames: readonly string[];
  /** Every file, by its name with the .proto suffix (FileDescriptorProto.name). */
  readonly #files = new Map<string, DescFile>();
  /** The file declaring each fully-qualified name: types, services, methods, fields, enum values. */
  readonly #symbols = new Map<string, DescFile>();
  /** The extensions of each extended message, by its fully-qualified name. */
  readonly #extensions = new Map<string, DescExtension[]>();

  constructor(services: readonly DescService[], messages: readonly DescMessage[] = []) {
    this.serviceNames = [...new Set(services.map((service) => service.typeName))];
    for (const service of services) this.#addFile(service.file);
    for (const message of messages) this.#addFile(message.file);
  }

  file(name: string): DescFile | undefined {
    return this.#files.get(name);
  }

  fileOfSymbol(name: string): DescFile | undefined {
    return this.#symbols.get(name);
  }

  fileOfExtension(extendee: string, number: number): DescFile | undefined {
    return this.#extensions.get(extendee)?.find((extension) => extension.number === number)?.file;
  }

  /** The field numbers of the known extensions of a message, or undefined for an unknown message. */
  extensionNumbers(extendee: string): number[] | undefined {
    if (this.#symbols.get(extendee) === undefined) return undefined;
    return (this.#extensions.get(extendee) ?? []).map((extension) => extension.number);
  }

  /**
   * The encoded file, then those of its transitive imports not yet in `sent` (which it extends):
   * the protocol lets a stream skip files it has already sent, but always answers with the file asked for.
   */
  encodeWithImports(file: DescFile, sent: Set<DescFile>): Uint8Array[] {
    const answer = [file, ...importsOf(file).filter((imported) => !sent.has(imported))];
    for (const included of answer) sent.add(included);
    return answer.map((included) => toBinary(FileDescriptorProtoSchema, included.proto));
  }

  #addFile(file: DescFile): void {
    if (this.#files.has(file.proto.name)) return;
    this.#files.set(file.proto.name, file);
    for (const name of declaredNames(file)) this.#symbols.set(name, file);
    for (const type of nestedTypes(file)) {
      if (type.kind !== "extension") continue;
      const known = this.#extensions.get(type.extendee.typeName) ?? [];
      this.#extensions.set(type.extendee.typeName, [...known, type]);
    }
    for (const imported of file.dependencies) this.#addFile(imported);
  }
}

/** Every file `file` imports, directly or not, each once. */
function importsOf(file: DescFile, seen = new Set<DescFile>([file])): DescFile[] {
  const found: DescFile[] = [];
  for (const imported of file.dependencies) {
    if (seen.has(imported)) continue;
    seen.add(imported);
    found.push(imported, ...importsOf(imported, seen));
  }
  return found;
}

/**
 * The fully-qualified names a file declares. Enum values are scoped like their enum, not inside
 * it (protobuf's C++ scoping rule): `pkg.Kind.KIND_ALPHA` is `pkg.KIND_ALPHA`.
 */
function* declaredNames(file: DescFile): Iterable<string> {
  for (const type of nestedTypes(file)) {
    yield type.typeName;
    switch (type.kind) {
      case "message":
        for (const member of [...type.fields, ...type.oneofs]) yield `${type.typeName}.${member.name}`;
        break;
      case "enum": {
        const scope = type.typeName.slice(0, type.typeName.length - type.name.length);
        for (const value of type.values) yield `${scope}${value.name}`;
        break;
      }
      case "service":
        for (const method of type.methods) yield `${type.typeName}.${method.name}`;
        break;
    }
  }
}
