import type { DescriptorProto, FileDescriptorSet } from "@bufbuild/protobuf/wkt";

/**
 * The comments of proto declarations, keyed by fully-qualified name: `pkg.Message`,
 * `pkg.Message.field`, `pkg.Enum`, `pkg.Service`, `pkg.Service.Method`.
 */
export type Comments = ReadonlyMap<string, string>;

/**
 * Reads the comments of every message, field, enum, service and method from descriptors built with
 * their source info (`buf build`). The leading comment is taken, else the trailing one; lines lose
 * the one space after `//` and buf:lint directives are dropped, so the text reads as Markdown.
 * protobuf-es strips source info from the descriptors it embeds in gen/, hence this separate input.
 */
export function readComments(set: FileDescriptorSet): Comments {
  const comments = new Map<string, string>();
  for (const file of set.file) {
    const names = new Map<string, string>();
    const scope = file.package === "" ? "" : `${file.package}.`;
    file.messageType.forEach((message, i) => nameMessage(names, [4, i], `${scope}${message.name}`, message));
    file.enumType.forEach((enumType, i) => names.set(key([5, i]), `${scope}${enumType.name}`));
    file.service.forEach((service, i) => {
      const serviceName = `${scope}${service.name}`;
      names.set(key([6, i]), serviceName);
      service.method.forEach((method, j) => names.set(key([6, i, 2, j]), `${serviceName}.${method.name}`));
    });
    for (const location of file.sourceCodeInfo?.location ?? []) {
      const name = names.get(key(location.path));
      const text = clean(location.leadingComments ?? location.trailingComments ?? "");
      if (name !== undefined && text !== "") comments.set(name, text);
    }
  }
  return comments;
}

/** Source info locates a declaration by its path of field numbers and indexes in the FileDescriptorProto. */
function key(path: readonly number[]): string {
  return path.join(",");
}

function nameMessage(names: Map<string, string>, path: number[], name: string, message: DescriptorProto): void {
  names.set(key(path), name);
  message.field.forEach((field, i) => names.set(key([...path, 2, i]), `${name}.${field.name}`));
  message.nestedType.forEach((nested, i) => nameMessage(names, [...path, 3, i], `${name}.${nested.name}`, nested));
  message.enumType.forEach((nested, i) => names.set(key([...path, 4, i]), `${name}.${nested.name}`));
}

function clean(comment: string): string {
  return comment
    .split("\n")
    .map((line) => line.replace(/^ /, "").trimEnd())
    .filter((line) => !line.startsWith("buf:lint:"))
    .join("\n")
    .trim();
}
