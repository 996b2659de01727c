import type * as net from "node:net";

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export type PlaintextProtocol = "h2c" | "http/1.1";

/** "h2c" once the whole HTTP/2 client preface is in, "http/1.1" at the first byte that differs, undefined until then. */
export function protocolOfFirstBytes(head: Buffer): PlaintextProtocol | undefined {
  const compared = Math.min(head.length, HTTP2_PREFACE.length);
  if (!head.subarray(0, compared).equals(HTTP2_PREFACE.subarray(0, compared))) return "http/1.1";
  return compared === HTTP2_PREFACE.length ? "h2c" : undefined;
}

/**
 * Reads a fresh plaintext connection until its first bytes tell HTTP/2 from HTTP/1.1, then puts
 * them back and hands the socket over, once. A real client's preface may arrive in pieces, so the
 * bytes are gathered until they decide. A connection that has not decided within `deadlineMs`
 * (silent, or stuck inside the preface) is closed: until handed over, no server's timeouts apply.
 */
export function routeByPreface(socket: net.Socket, deadlineMs: number, handOver: (protocol: PlaintextProtocol) => void): void {
  let head = Buffer.alloc(0);
  const deadline = setTimeout(() => socket.destroy(), deadlineMs);
  const onReadable = () => {
    for (let chunk: Buffer | null; (chunk = socket.read()) !== null; ) head = Buffer.concat([head, chunk]);
    const protocol = protocolOfFirstBytes(head);
    if (protocol === undefined) return;
    clearTimeout(deadline);
    socket.off("readable", onReadable);
    socket.unshift(head);
    handOver(protocol);
  };
  socket.on("readable", onReadable);
  socket.once("close", () => clearTimeout(deadline));
  socket.once("error", () => socket.destroy());
}
