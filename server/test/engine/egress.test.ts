// A worker's egress proxy on its own (server/src/engine/pool/egress.ts): what it lets through
// and what it refuses, over a real Unix socket to a real upstream on loopback.
import net, { createServer, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Egress } from "../../src/engine/pool/egress.ts";
import { tempDir } from "../helpers/pool.ts";

let box: { path: string; remove(): Promise<void> };
let upstream: Server;
let port: number;
let granted: string[] = [];
let egress: Egress;

beforeAll(async () => {
  box = await tempDir("skillenv-egress-");
  // An upstream that says hello and echoes.
  upstream = createServer((socket) => {
    socket.write("hello\n");
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  port = (upstream.address() as AddressInfo).port;
  egress = await Egress.listen(join(box.path, "egress.sock"), () => granted);
});

afterAll(async () => {
  await egress?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  await box?.remove();
});

/** Sends `head` to the proxy; resolves with everything it answers until the first line of the tunnel or the end. */
async function ask(head: string): Promise<{ socket: net.Socket; answer: string }> {
  const socket = net.connect(egress.socketPath);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(head);
  const answer = await new Promise<string>((resolve) => {
    let text = "";
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n\r\n") && (!text.startsWith("HTTP/1.1 200") || text.includes("hello\n"))) resolve(text);
    });
    socket.once("close", () => resolve(text));
  });
  return { socket, answer };
}

const connect = (target: string, scheme = "http") => `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nX-Skillenv-Scheme: ${scheme}\r\n\r\n`;

describe("a worker's egress proxy", () => {
  it("opens a tunnel to a granted origin, and it carries bytes both ways", async () => {
    granted = [`http://127.0.0.1:${port}`];
    const { socket, answer } = await ask(connect(`127.0.0.1:${port}`));
    expect(answer).toBe("HTTP/1.1 200 Connection Established\r\n\r\nhello\n");
    socket.write("ping\n");
    expect(await new Promise((resolve) => socket.once("data", (chunk) => resolve(chunk.toString())))).toBe("ping\n");
    socket.destroy();
  });

  it("refuses with 403 an origin not granted: another port, another scheme, nothing granted", async () => {
    granted = [`http://127.0.0.1:${port}`];
    expect((await ask(connect(`127.0.0.1:${port + 1}`))).answer).toMatch(/^HTTP\/1\.1 403 /);
    expect((await ask(connect(`127.0.0.1:${port}`, "https"))).answer).toMatch(/^HTTP\/1\.1 403 /);
    granted = [];
    expect((await ask(connect(`127.0.0.1:${port}`))).answer).toMatch(/^HTTP\/1\.1 403 /);
  });

  it("checks the host it connects to: another spelling of a granted address is that address", async () => {
    granted = [`http://127.0.0.1:${port}`];
    // 2130706433 is 127.0.0.1 as one number: the URL parser makes it the granted host, and that is where it connects.
    expect((await ask(connect(`2130706433:${port}`))).answer).toMatch(/^HTTP\/1\.1 200 /);
    expect((await ask(connect(`localhost:${port}`))).answer).toMatch(/^HTTP\/1\.1 403 /);
  });

  it("refuses what is not a CONNECT with a scheme, a head too long, and bytes before its answer", async () => {
    granted = [`http://127.0.0.1:${port}`];
    expect((await ask(`GET http://127.0.0.1:${port}/ HTTP/1.1\r\nX-Skillenv-Scheme: http\r\n\r\n`)).answer).toMatch(/^HTTP\/1\.1 400 /);
    expect((await ask(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`)).answer).toMatch(/^HTTP\/1\.1 400 /);
    expect((await ask(`CONNECT user@127.0.0.1:${port} HTTP/1.1\r\nX-Skillenv-Scheme: http\r\n\r\n`)).answer).toMatch(/^HTTP\/1\.1 400 /);
    expect((await ask(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nX: ${"x".repeat(10_000)}`)).answer).toMatch(/^HTTP\/1\.1 431 /);
    expect((await ask(`${connect(`127.0.0.1:${port}`)}early`)).answer).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("closes a tunnel once no invocation in flight grants its origin", async () => {
    granted = [`http://127.0.0.1:${port}`];
    const { socket } = await ask(connect(`127.0.0.1:${port}`));
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    granted = [];
    egress.revoke();
    await closed;
  });
});
