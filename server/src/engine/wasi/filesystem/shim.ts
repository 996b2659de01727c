// The parts of preview2-shim (Node build) this filesystem meets: the stream, pollable and error
// classes that the rest of a guest's WASI world (stdio, wasi:http) still uses, and its own
// filesystem-error-code for the errors of those streams.
import * as preview2 from "@bytecodealliance/preview2-shim";

// biome-ignore lint/suspicious/noExplicitAny: any class, whatever its constructor takes
type Class = abstract new (...args: any[]) => any;

interface ShimNamespaces {
  io: {
    streams: { InputStream: Class; OutputStream: Class };
    poll: { Pollable: Class };
    error: { Error: new (payload: unknown) => object };
  };
  filesystem: { types: { filesystemErrorCode(error: unknown): string | undefined } };
}

// Typed from the package's browser build; the Node build has these namespaces.
const shim = preview2 as unknown as ShimNamespaces;

export const ShimInputStream = shim.io.streams.InputStream;
export const ShimOutputStream = shim.io.streams.OutputStream;
export const ShimPollable = shim.io.poll.Pollable;
/** wasi:io/error's `error` resource: the glue accepts no other class in a stream error. */
export const IoError = shim.io.error.Error;
export const shimFilesystemErrorCode = shim.filesystem.types.filesystemErrorCode;
