/**
 * Where a command runs: under bubblewrap when it works on this kernel, else as a plain process in
 * the workspace directory. README.md says what each isolates and what it does not.
 */
import * as fs from "node:fs";
import { runCommand } from "./command.ts";
import type { BwrapMode } from "./settings.ts";

/** A process to start. */
export interface Launch {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** bwrap with `--info-fd 3`: it reports the sandbox's first process on fd 3, so that the command's end can wait for the sandbox's (command.ts). */
  reportsSandbox?: boolean;
}

export interface Sandbox {
  /** For the startup line. */
  readonly description: string;
  /** How to run `script` with the shell in the workspace at host path `workspace`. */
  launch(script: string, workspace: string): Launch;
}

export interface SandboxChoice {
  sandbox: Sandbox;
  /** Why commands are not sandboxed, when they are not. */
  warning?: string;
}

/** Models write bash; Debian always has it, a minimal image may only have sh. */
const SHELL = fs.existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";

/** Where the workspace appears inside the sandbox. */
const SANDBOX_WORKSPACE = "/workspace";

/** Directories the system's programs live in. On a merged-/usr system all but /usr are symlinks into it. */
const SYSTEM_DIRECTORIES = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * What programs need of /etc: the dynamic linker's cache, users and groups, name resolution, TLS
 * roots, Debian's alternatives (awk, editors) and the time zone. Not the rest (/etc/shadow, keys).
 */
const ETC_ENTRIES = [
  "alternatives",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "passwd",
  "group",
  "nsswitch.conf",
  "hosts",
  "resolv.conf",
  "ssl",
  "ca-certificates",
  "localtime",
];

/** A command's whole environment: nothing of the extension's own, its credential above all. */
function commandEnv(home: string): Record<string, string> {
  return { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: home, LANG: "C.UTF-8" };
}

export const plainProcess: Sandbox = {
  description: "plain processes, unsandboxed",
  launch: (script, workspace) => ({ file: SHELL, args: ["-c", script], cwd: workspace, env: commandEnv(workspace) }),
};

export function bubblewrap(network: boolean): Sandbox {
  const fixed = [...isolation(network), ...systemBinds()];
  return {
    description: `bubblewrap, network ${network ? "on" : "off"}`,
    launch: (script, workspace) => ({
      file: "bwrap",
      args: [...fixed, "--info-fd", "3", "--bind", workspace, SANDBOX_WORKSPACE, "--chdir", SANDBOX_WORKSPACE, SHELL, "-c", script],
      cwd: workspace,
      env: commandEnv(SANDBOX_WORKSPACE),
      reportsSandbox: true,
    }),
  };
}

/**
 * New namespaces of every kind (network too unless allowed); the sandbox dies with the extension;
 * a new session so a command cannot push keystrokes into a terminal (TIOCSTI); no capabilities, which
 * matters when the extension runs as root.
 */
function isolation(network: boolean): string[] {
  return ["--unshare-all", ...(network ? ["--share-net"] : []), "--die-with-parent", "--new-session", "--cap-drop", "ALL"];
}

/** Read-only system directories as they are on the host, part of /etc, and private /proc, /dev and /tmp. */
function systemBinds(): string[] {
  return [
    ...SYSTEM_DIRECTORIES.flatMap(asOnHost),
    ...ETC_ENTRIES.flatMap((entry) => ["--ro-bind-try", `/etc/${entry}`, `/etc/${entry}`]),
    ...["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"],
  ];
}

function asOnHost(directory: string): string[] {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(directory);
  } catch {
    return [];
  }
  return stat.isSymbolicLink() ? ["--symlink", fs.readlinkSync(directory), directory] : ["--ro-bind", directory, directory];
}

/**
 * Picks the sandbox once at startup. bubblewrap needs user namespaces (or root) and may be
 * missing, so it is tried for real: `true` in a sandbox over `probeDirectory`.
 */
export async function chooseSandbox(mode: BwrapMode, network: boolean, probeDirectory: string): Promise<SandboxChoice> {
  if (mode === "off") return { sandbox: plainProcess, warning: "bubblewrap is switched off (--bwrap off)" };
  const sandbox = bubblewrap(network);
  const failure = await probe(sandbox.launch("true", probeDirectory));
  if (failure === undefined) return { sandbox };
  if (mode === "on") throw new Error(`bubblewrap does not work here (--bwrap on): ${failure}`);
  return { sandbox: plainProcess, warning: `bubblewrap does not work here: ${failure}` };
}

/** Undefined when the launch exits 0, else why not. Run as a command is, fd 3 and all. */
async function probe(launch: Launch): Promise<string | undefined> {
  try {
    const outcome = await runCommand(launch, { outputLimit: 4096, timeoutMs: undefined, signal: new AbortController().signal });
    return outcome.exitCode === 0 ? undefined : outcome.stderr.trim() || `exit code ${outcome.exitCode}`;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
