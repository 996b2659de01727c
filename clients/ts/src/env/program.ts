/** A component given by its bytes: admitted as a tool or an agent-loop runtime when needed. */
export interface ComponentBytes {
  kind: "tool" | "agentloop";
  bytes: Uint8Array;
}

export interface ProgramOptions {
  /** An admitted runtime's digest (64 hex), or the runtime component itself. */
  runtime: string | ComponentBytes;
  /** The program text: a URL to fetch (http, https or file) or its UTF-8 bytes. */
  source: URL | Uint8Array;
  /** Handed to the program with every invocation: a tool's, or a run's agent loop's, unless the placement gives its own. */
  configuration?: unknown;
}

/** What a program resolves to: an implementation of a tool or an agent loop (spec §2.4). */
export interface ResolvedProgram {
  type: "service_program";
  /** "turn" when the runtime is an agent-loop runtime, "run" when it is a tool runtime. */
  entrypoint: "turn" | "run";
  /** Content address of the admitted source. */
  id: string;
  /** Digest of the admitted runtime component. */
  runtime: string;
  configuration: unknown;
}

/**
 * A program for the service environment. The factory performs no I/O; `client.env.resolve`
 * fetches the source, admits what the server lacks and returns the resolved implementation.
 */
export class Program {
  readonly runtime: string | ComponentBytes;
  readonly source: URL | Uint8Array;
  readonly configuration: unknown;

  constructor(options: ProgramOptions) {
    this.runtime = options.runtime;
    this.source = options.source;
    this.configuration = options.configuration;
  }
}

export function program(options: ProgramOptions): Program {
  return new Program(options);
}
