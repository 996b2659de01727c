/**
 * The contract between the service environment and the components it runs, as code reads it:
 * the worlds and interfaces of wit/env.wit (docs/wit.md) and the WASI 0.2 interfaces the
 * environment provides. Admission, preparation and the worker pool all take these facts from
 * here. Types are written as the component reader renders them (binary.ts): parameter names
 * left out, records spelled out.
 */

/** The interface every world `use`s for `failure`; it carries only that type. */
export const TYPES_INTERFACE = "skillenv:env/types@0.1.0";
/** Host services of an agent loop. */
export const HOST_INTERFACE = "skillenv:env/host@0.1.0";

const FAILURE = "record { code: string, message: string }";

/** The signature of both entrypoints: input, configuration, deadline-ms -> output or failure. */
export const ENTRYPOINT_TYPE = `func(string, string, u64) -> result<string, ${FAILURE}>`;

/** Which contract of wit/env.wit a component implements, named by the function it exports. */
export type Entrypoint = "run" | "turn";

export interface World {
  /** The world's WIT name. */
  name: string;
  entrypoint: Entrypoint;
  /** Whether components of this world may import HOST_INTERFACE. */
  host: boolean;
}

export const WORLDS: Readonly<Record<Entrypoint, World>> = {
  run: { name: "skillenv:env/tool@0.1.0", entrypoint: "run", host: false },
  turn: { name: "skillenv:env/agent-loop@0.1.0", entrypoint: "turn", host: true },
};

/** The functions of the skillenv:env interfaces, with their types. */
export const ENV_FUNCTIONS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  [TYPES_INTERFACE]: {},
  [HOST_INTERFACE]: {
    "call-model": `func(string) -> result<string, ${FAILURE}>`,
    "dispatch-tools": `func(string) -> result<string, ${FAILURE}>`,
    emit: "func(string)",
  },
};

/** Host functions a guest waits on: it is suspended meanwhile (JSPI), holding no worker thread. */
export const SUSPENDING_HOST_FUNCTIONS: readonly string[] = ["call-model", "dispatch-tools"];

/**
 * The WASI 0.2 interfaces the service environment provides, unversioned (any 0.2.x is accepted,
 * see WASI_VERSION). Sockets are absent: network access is HTTP only, checked per request against
 * the granted origins. `wasi:cli/exit` is provided because most toolchains import it; the host
 * turns an exit into a failed invocation, never into an exit of the worker.
 * `wasi:cli/environment` is served empty: secrets are files under /secrets, not variables.
 */
export const WASI_INTERFACES = [
  "wasi:cli/environment",
  "wasi:cli/exit",
  "wasi:cli/stdin",
  "wasi:cli/stdout",
  "wasi:cli/stderr",
  "wasi:cli/terminal-input",
  "wasi:cli/terminal-output",
  "wasi:cli/terminal-stdin",
  "wasi:cli/terminal-stdout",
  "wasi:cli/terminal-stderr",
  "wasi:clocks/monotonic-clock",
  "wasi:clocks/wall-clock",
  "wasi:filesystem/preopens",
  "wasi:filesystem/types",
  "wasi:io/error",
  "wasi:io/poll",
  "wasi:io/streams",
  "wasi:random/random",
  "wasi:random/insecure",
  "wasi:random/insecure-seed",
  "wasi:http/types",
  "wasi:http/outgoing-handler",
] as const;

export type WasiInterface = (typeof WASI_INTERFACES)[number];

/** The versions of WASI the environment provides: 0.2.x. */
export const WASI_VERSION = /^0\.2\.(0|[1-9][0-9]*)$/;

/** An interface name without its version, as jco keys a component's imports (`wasi:io/poll`). */
export function unversioned(name: string): string {
  const at = name.lastIndexOf("@");
  return at < 0 ? name : name.slice(0, at);
}
