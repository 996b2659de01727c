import { createHash } from "node:crypto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { componentEmbed, componentNew, parse } from "@bytecodealliance/jco";

const root = path.resolve(import.meta.dirname, "../../..");
const ENV_WIT_FILE = path.join(root, "wit", "env.wit");

/**
 * Worlds for tiny test components. Each imported interface needs a function, or the component
 * drops the import; the WASI packages are minimal stand-ins with one function per interface.
 */
const TEST_WORLDS = `package test:worlds;

world tool { include skillenv:env/tool@0.1.0; }
world agent-loop { include skillenv:env/agent-loop@0.1.0; }
world tool-wasi {
  include skillenv:env/tool@0.1.0;
  import wasi:io/streams@0.2.3;
  import wasi:cli/exit@0.2.3;
  import wasi:http/outgoing-handler@0.2.3;
}
world tool-sockets {
  include skillenv:env/tool@0.1.0;
  import wasi:sockets/tcp@0.2.3;
}
world tool-wasi-unprovided {
  include skillenv:env/tool@0.1.0;
  import wasi:cli/run@0.2.3;
}
world tool-wasi-03 {
  include skillenv:env/tool@0.1.0;
  import wasi:io/streams@0.3.0;
}
world tool-wasi-prototype {
  include skillenv:env/tool@0.1.0;
  import wasi:%constructor/call@0.2.3;
}
world tool-host {
  include skillenv:env/tool@0.1.0;
  import skillenv:env/host@0.1.0;
}
world tool-vendor {
  include skillenv:env/tool@0.1.0;
  import acme:vault/secrets@1.0.0;
}
world tool-resource {
  include skillenv:env/tool@0.1.0;
  resource handle;
  import open: func() -> handle;
}
world both {
  use skillenv:env/types@0.1.0.{failure};
  export run: func(input: string, configuration: string, deadline-ms: u64) -> result<string, failure>;
  export turn: func(input: string, configuration: string, deadline-ms: u64) -> result<string, failure>;
}
world neither { export hello: func() -> string; }
world bad-run { export run: func() -> s32; }
world tool-random-f {
  include skillenv:env/tool@0.1.0;
  import wasi:random/random@0.2.3;
}

package wasi:io@0.2.3 { interface streams { flush: func(); } }
package wasi:io@0.3.0 { interface streams { flush: func(); } }
package wasi:cli@0.2.3 {
  interface exit { exit: func(ok: bool); }
  interface run { run: func(); }
}
package wasi:%constructor@0.2.3 { interface call { call: func(); } }
package wasi:http@0.2.3 { interface outgoing-handler { handle: func(); } }
package wasi:sockets@0.2.3 { interface tcp { connect: func(); } }
package wasi:random@0.2.3 { interface random { f: func(); } }
package acme:vault@1.0.0 { interface secrets { reveal: func() -> string; } }
`;

export type TestWorld =
  | "tool"
  | "agent-loop"
  | "tool-wasi"
  | "tool-sockets"
  | "tool-wasi-unprovided"
  | "tool-wasi-03"
  | "tool-wasi-prototype"
  | "tool-host"
  | "tool-vendor"
  | "tool-resource"
  | "both"
  | "neither"
  | "bad-run"
  | "tool-random-f";

/** A component of the world with a dummy core module: valid, but traps if called. */
export async function testComponent(world: TestWorld): Promise<Uint8Array> {
  const envWit = (await fs.readFile(ENV_WIT_FILE, "utf8")).replace(/^package skillenv:env@0\.1\.0;$/m, "");
  const witSource = `${TEST_WORLDS}\npackage skillenv:env@0.1.0 {\n${envWit}\n}\n`;
  return componentNew(await componentEmbed({ dummy: true, witSource, world }));
}

export function coreModule(): Promise<Uint8Array> {
  return parse(`(module (func (export "run")))`);
}

/**
 * The same component with a custom section appended: still valid, `padding` bytes larger, and
 * with another content address for every distinct `label`.
 */
export function withCustomSection(component: Uint8Array, label: string, padding = 0): Uint8Array {
  const name = new TextEncoder().encode(label);
  const payload = [...leb(name.byteLength), ...name, ...new Uint8Array(padding)];
  return new Uint8Array([...component, 0x00, ...leb(payload.length), ...payload]);
}

function leb(value: number): number[] {
  const bytes: number[] = [];
  do {
    const byte = value & 0x7f;
    value >>>= 7;
    bytes.push(value === 0 ? byte : byte | 0x80);
  } while (value !== 0);
  return bytes;
}

/**
 * A real componentize-js tool (~12 MB: the StarlingMonkey engine plus the source). Building takes
 * a minute or more on a small machine, so the result is cached in the OS temp directory under a
 * hash of everything that shapes it.
 */
export async function componentizeJsTool(source: string): Promise<Uint8Array> {
  // The inline-WIT form needs no filesystem preopens; the package's published types lag it.
  const componentize = (await import("@bytecodealliance/componentize-js")).componentize as unknown as (
    source: string,
    witWorld: string,
    options: { worldName: string },
  ) => Promise<{ component: Uint8Array }>;
  const version = JSON.parse(await fs.readFile(path.join(root, "node_modules/@bytecodealliance/componentize-js/package.json"), "utf8")).version;
  const witWorld = await fs.readFile(ENV_WIT_FILE, "utf8");
  const key = createHash("sha256")
    .update(JSON.stringify([version, witWorld, source]))
    .digest("hex")
    .slice(0, 32);
  const cached = path.join(os.tmpdir(), "skillenv-test-components", `${key}.wasm`);
  try {
    return await fs.readFile(cached);
  } catch {
    const { component } = await componentize(source, witWorld, { worldName: "tool" });
    await fs.mkdir(path.dirname(cached), { recursive: true });
    const partial = `${cached}.${process.pid}.tmp`;
    await fs.writeFile(partial, component);
    await fs.rename(partial, cached);
    return component;
  }
}
