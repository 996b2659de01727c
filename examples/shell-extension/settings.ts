/**
 * The operator's choices, from command-line flags or environment variables (a flag wins over its
 * variable). The credential is read from the environment only: a command line is visible to
 * every user of the machine (ps).
 */
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";

export type BwrapMode = "auto" | "on" | "off";

export interface Settings {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Every binding's directory is made under it. */
  root: string;
  /** The bearer credential every call must carry; undefined: calls are not authenticated. */
  token: string | undefined;
  /** Bytes kept of each of a command's stdout and stderr, and of a file read. */
  outputLimit: number;
  /** Whether sandboxed commands reach the network (without bubblewrap they always do). */
  network: boolean;
  /** auto: bubblewrap when it works here, else plain processes with a warning; on: bubblewrap or refuse to start. */
  bwrap: BwrapMode;
}

const DEFAULT_OUTPUT_LIMIT = 64 * 1024;

/** Flag name -> environment variable. */
const VARIABLES = {
  host: "SHELL_EXTENSION_HOST",
  port: "SHELL_EXTENSION_PORT",
  root: "SHELL_EXTENSION_ROOT",
  "output-limit": "SHELL_EXTENSION_OUTPUT_LIMIT",
  network: "SHELL_EXTENSION_NETWORK",
  bwrap: "SHELL_EXTENSION_BWRAP",
} as const;

type Flag = keyof typeof VARIABLES;

export function readSettings(args: string[], env: NodeJS.ProcessEnv): Settings {
  const { values } = parseArgs({
    args,
    options: Object.fromEntries(Object.keys(VARIABLES).map((flag) => [flag, { type: "string" }])) as Record<Flag, { type: "string" }>,
  });
  const pick = (flag: Flag, fallback: string): string => values[flag] ?? env[VARIABLES[flag]] ?? fallback;
  return {
    host: pick("host", "127.0.0.1"),
    port: parseInteger("port", pick("port", "0"), 0, 65535),
    root: path.resolve(pick("root", path.join(os.tmpdir(), "shell-extension"))),
    token: env.SHELL_EXTENSION_TOKEN || undefined,
    outputLimit: parseInteger("output-limit", pick("output-limit", String(DEFAULT_OUTPUT_LIMIT)), 1, 2 ** 30),
    network: parseChoice("network", pick("network", "off"), ["on", "off"]) === "on",
    bwrap: parseChoice("bwrap", pick("bwrap", "auto"), ["auto", "on", "off"]),
  };
}

function parseInteger(flag: Flag, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${describe(flag)}: expected an integer from ${min} to ${max}, got "${text}"`);
  return value;
}

function parseChoice<const Choice extends string>(flag: Flag, text: string, choices: readonly Choice[]): Choice {
  const choice = choices.find((candidate) => candidate === text);
  if (choice === undefined) throw new Error(`${describe(flag)}: expected one of ${choices.join(", ")}, got "${text}"`);
  return choice;
}

function describe(flag: Flag): string {
  return `--${flag} (${VARIABLES[flag]})`;
}
