import { accessSync, constants, existsSync, realpathSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Where a worker reaches its egress socket inside the sandbox. */
export const SANDBOX_EGRESS_SOCKET = "/run/skillenv/egress.sock";

/** The project's root: the runtime's code lives below it (package.json, server/src, node_modules). */
const PROJECT_ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");

/** What one worker process may see, besides the system's read-only runtime. */
export interface SandboxView {
  /** The prepared components of the current toolchain: read-only. */
  prepared: string;
  /** Every binding's /workspace lives below it: read-write (guests reach only their own). */
  workspaceRoot: string;
  /** This worker's own directory for invocations' /scratch: read-write. */
  scratchRoot: string;
  /** The worker's egress socket, bound at SANDBOX_EGRESS_SOCKET. */
  egressSocket: string;
  /** The compile cache of the workers' own code (compile-cache.ts): read-only. */
  compileCache: string;
}

/**
 * The bubblewrap command line of a worker process (docs/environments.md, "The sandbox"): new
 * user, mount, PID, IPC, UTS, network and cgroup namespaces, no capabilities, killed with the
 * pool. Not `--new-session`: bubblewrap's child calls setsid() early, which takes the sandbox out
 * of the worker's process group, so that stopping the group could miss it (see
 * WorkerProcess.kill); the worker is spawned detached instead, leading a session of its own that
 * has no controlling terminal, so there is no terminal to inject keystrokes into either way.
 * Its filesystem is an empty root with only: the system's /usr and the dynamic loader's cache,
 * read-only; the Node binary and the project's code and dependencies, read-only; the prepared
 * components and the compile cache of the workers' own code, read-only; the workspace root and
 * the worker's scratch directory, read-write; a private /proc (its own processes only), a
 * minimal /dev, an empty /tmp. Never the data directory's keys, metadata or blobs, nor the
 * server's environment (the process gets only what `env` holds).
 */
export function bubblewrapArguments(view: SandboxView, command: readonly string[]): string[] {
  const args = runtimeSandbox();
  args.push(...readOnly(view.prepared), ...readOnly(view.compileCache));
  args.push("--bind", realpathSync(view.workspaceRoot), view.workspaceRoot);
  args.push("--bind", realpathSync(view.scratchRoot), view.scratchRoot);
  args.push("--ro-bind", view.egressSocket, SANDBOX_EGRESS_SOCKET);
  args.push("--chdir", "/", "--", ...command);
  return args;
}

/**
 * The bubblewrap command line that fills the workers' compile cache (compile-cache.ts): the
 * workers' sandbox with nothing of the data directory but the cache, which it may write.
 */
export function compileCacheSandboxArguments(compileCache: string, command: readonly string[]): string[] {
  return [...runtimeSandbox(), "--bind", realpathSync(compileCache), compileCache, "--chdir", "/", "--", ...command];
}

const readOnly = (path: string) => ["--ro-bind", realpathSync(path), path];

/** Namespaces, identity, the system's runtime and the project's code: what every sandbox here starts from. */
function runtimeSandbox(): string[] {
  const args = [
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--uid",
    "1000",
    "--gid",
    "1000",
    "--hostname",
    "skillenv-worker",
    "--ro-bind",
    "/usr",
    "/usr",
    // Debian's merged /usr: the loader and libraries are reached through these.
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/bin",
    "/bin",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
  ];
  if (existsSync("/etc/ld.so.cache")) args.push(...readOnly("/etc/ld.so.cache"));
  // The Node binary wherever it is (the npm package `node` keeps it under node_modules).
  args.push(...readOnly(process.execPath));
  for (const part of ["package.json", join("server", "src"), "node_modules"]) args.push(...readOnly(join(PROJECT_ROOT, part)));
  return args;
}

/**
 * The bubblewrap executable on the server's PATH, as a shell would find it; undefined when there
 * is none. (Given an environment without PATH, as workers are, Node's spawn would search a
 * default path instead: the server's own PATH is what the operator set.)
 */
export function findBubblewrap(path = process.env.PATH ?? ""): string | undefined {
  return findOnPath("bwrap", path);
}

/** Bash, from the server's PATH or else /usr/bin or /bin (the launcher that closes inherited descriptors needs it). */
export function findBash(path = process.env.PATH ?? ""): string | undefined {
  // Bash is essential on Debian: /bin/bash is there whatever PATH the server was given.
  return findOnPath("bash", path) ?? findOnPath("bash", ["/usr/bin", "/bin"].join(delimiter));
}

/** The descriptors a worker process is started with (stdin to the start register: WorkerProcess). */
export const WORKER_DESCRIPTORS = 7;

/**
 * `command` started by bash with only the worker's descriptors (0-6) open: every other one the
 * server holds without close-on-exec (LevelDB opens its files so) is closed before the command
 * (bubblewrap, or the plain worker) runs, so no worker holds the server's metadata store, blobs
 * or keys open, whatever its sandbox lets it see by path.
 */
export function withOwnDescriptorsOnly(bash: string, command: readonly string[]): string[] {
  const script = `for fd in /proc/self/fd/*; do fd=\${fd##*/}; if (( fd >= ${WORKER_DESCRIPTORS} )); then exec {fd}>&-; fi; done; exec "$@"`;
  return [bash, "-c", script, "skillenv-worker", ...command];
}

/**
 * The command line that starts `node` (a Node command line) with only the worker's descriptors,
 * inside bubblewrap with `sandboxArguments` when `sandbox` is set. Throws when bubblewrap or bash
 * is missing.
 */
export function launchCommand(sandbox: boolean, node: readonly string[], sandboxArguments: (node: readonly string[]) => string[]): string[] {
  let bubblewrap: string | undefined;
  if (sandbox) {
    bubblewrap = findBubblewrap();
    if (!bubblewrap) throw new Error("bubblewrap (bwrap) is not on the server's PATH");
  }
  const bash = findBash();
  if (!bash) throw new Error("bash is not on the server's PATH (it starts each worker with only its own descriptors)");
  return withOwnDescriptorsOnly(bash, bubblewrap ? [bubblewrap, ...sandboxArguments(node)] : node);
}

function findOnPath(name: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
