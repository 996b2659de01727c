// The import namespaces of this filesystem, as jco's glue looks them up. They hold no state:
// every instance of a worker shares them, and each call reaches its invocation's GuestFilesystem
// through the descriptor or stream it is made on.
import { Descriptor, DirectoryEntryStream } from "./descriptor.ts";
import { InputStream, OutputStream } from "./io-unions.ts";
import { filesystemErrorCode } from "./stream-error.ts";

/** wasi:filesystem/types. */
export const filesystemTypes = { Descriptor, DirectoryEntryStream, filesystemErrorCode };

/** wasi:io/streams: both kinds of stream (see io-unions.ts). */
export const ioStreams = { InputStream, OutputStream };

export { Pollable } from "./io-unions.ts";
