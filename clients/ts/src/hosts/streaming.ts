import type { Transport } from "@connectrpc/connect";

/**
 * How a host environment receives its commands. "bidirectional": one stream (HostService
 * Connect) carries commands in and receipts out; it needs a transport that can stream a request
 * body: HTTP/2 or gRPC. "server-streaming": commands arrive on a server stream (Commands) and
 * each receipt is a unary call (Report); every transport can carry it, browsers included.
 */
export type HostStreaming = "bidirectional" | "server-streaming";

const declared = new WeakMap<Transport, HostStreaming>();

/** Records which form a transport made by this client's factories can carry. */
export function declareHostStreaming(transport: Transport, streaming: HostStreaming): Transport {
  declared.set(transport, streaming);
  return transport;
}

/** A transport made elsewhere gets the form every transport can carry. */
export function hostStreamingOf(transport: Transport): HostStreaming {
  return declared.get(transport) ?? "server-streaming";
}
