// The WASI world of a guest instance, built from preview2-shim's Node implementation with the
// leaky defaults replaced: no environment variables, no arguments, no host cwd, `exit` is a
// failure instead of process.exit, only the granted preopens, outgoing HTTP checked per request
// against the network grant, and no sockets at all (preparation refuses components importing them).
// The filesystem is the engine's own (./filesystem), and wasi:io's streams and pollables are
// the classes that stand for both its streams and the shim's.
import * as shim from "@bytecodealliance/preview2-shim";
import type { WasiInterface } from "../component/index.ts";
import { filesystemTypes, ioStreams, Pollable as IoPollable, type Descriptor } from "./filesystem/index.ts";
import { neverBlocks, suspendUntilReady, type SuspendingContext } from "./blocking.ts";
import { requestAllowed, schemeOf } from "./network.ts";

/** What an instance's imports consult at call time: set when the instance is claimed. */
export interface WasiContext extends SuspendingContext {
  preopens: [Descriptor, string][];
  network: readonly string[];
}

/** Thrown (through the guest) by wasi:cli/exit: the invocation fails; the process lives on. */
export class GuestExit extends Error {
  readonly status: string;
  constructor(status: string) {
    super(`the guest called wasi:cli/exit (${status})`);
    this.status = status;
  }
}

// Typed from the package's browser build; the Node build has the same namespaces.
// biome-ignore lint/suspicious/noExplicitAny: the Node build's namespaces, which its types do not describe
const wasi = shim as any;

interface OutgoingRequest {
  scheme(): { tag: string; val?: string } | undefined;
  authority(): string | undefined;
}

const environment = {
  getEnvironment: (): [string, string][] => [],
  getArguments: (): string[] => [],
  initialCwd: (): string | undefined => undefined,
};

const exit = {
  exit(status: { tag: string }): never {
    throw new GuestExit(status?.tag === "ok" ? "ok" : "err");
  },
  exitWithCode(code: number): never {
    throw new GuestExit(`code ${code}`);
  },
};

/** The worker's stdout: writes to it never wait. */
const guestOutput = wasi.cli.stdout.getStdout();
neverBlocks(guestOutput);

/** Namespaces that hold no per-invocation state: shared by every instance of a worker. */
const shared = {
  "wasi:cli/environment": environment,
  "wasi:cli/exit": exit,
  "wasi:cli/stdin": wasi.cli.stdin,
  // Guest output goes to the worker's stdout, which is /dev/null: it never reaches the service's
  // logs. stderr too: the worker's own stderr is the pool's only diagnostic of a failed start.
  "wasi:cli/stdout": { getStdout: () => guestOutput },
  "wasi:cli/stderr": { getStderr: () => guestOutput },
  "wasi:cli/terminal-input": wasi.cli.terminalInput,
  "wasi:cli/terminal-output": wasi.cli.terminalOutput,
  "wasi:cli/terminal-stdin": wasi.cli.terminalStdin,
  "wasi:cli/terminal-stdout": wasi.cli.terminalStdout,
  "wasi:cli/terminal-stderr": wasi.cli.terminalStderr,
  "wasi:clocks/monotonic-clock": wasi.clocks.monotonicClock,
  "wasi:clocks/wall-clock": wasi.clocks.wallClock,
  "wasi:filesystem/types": filesystemTypes,
  "wasi:io/error": wasi.io.error,
  "wasi:io/streams": ioStreams,
  "wasi:random/random": wasi.random.random,
  "wasi:random/insecure": wasi.random.insecure,
  "wasi:random/insecure-seed": wasi.random.insecureSeed,
  "wasi:http/types": wasi.http.types,
} satisfies Partial<Record<WasiInterface, unknown>>;

/** wasi:http error-code for a request outside the grant. */
const DENIED = { tag: "HTTP-request-denied" };

/**
 * The WASI import object of one instance: one namespace per interface of WASI_INTERFACES
 * (server/src/engine/component), no more, no less. `context()` is read on every call, so one instance can
 * be created ahead of demand and bound to its invocation later; before that it sees nothing.
 */
export function wasiImports(context: () => WasiContext | undefined): Record<WasiInterface, unknown> {
  return {
    ...shared,
    "wasi:io/poll": {
      Pollable: IoPollable,
      // Suspends the guest instead of blocking its worker's thread until a pollable is ready.
      poll: (list: { ready(): boolean }[]) => suspendUntilReady(context(), list),
    },
    "wasi:filesystem/preopens": {
      getDirectories: () => [...(context()?.preopens ?? [])],
    },
    "wasi:http/outgoing-handler": {
      handle(request: OutgoingRequest, options: unknown) {
        const granted = context()?.network ?? [];
        if (!requestAllowed(granted, schemeOf(request.scheme()), request.authority())) throw DENIED;
        return wasi.http.outgoingHandler.handle(request, options);
      },
    },
  };
}
