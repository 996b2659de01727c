// One invocation's filesystem: its preopens, the fds opened through them, and their end.
import { constants, openSync } from "node:fs";
import { Descriptor } from "./descriptor.ts";
import { errnoOf } from "./error-code.ts";
import { FileTable } from "./file-table.ts";
import { HostDirectory } from "./host-directory.ts";
import { UNLIMITED, type QuotaAccount } from "./quota.ts";
import { SecretDirectory } from "./secret-directory.ts";

/** Where the secrets directory appears to the guest. */
export const SECRETS_PATH = "/secrets";

/** Descriptors and streams a guest may hold open at once, by default. */
export const DEFAULT_MAX_OPEN_FILES = 256;

export interface PreopenDirectory {
  /** What the guest sees (get-directories): "/workspace", "/scratch". */
  guestPath: string;
  /** The host directory behind it; the guest never learns this path. */
  hostDir: string;
  readOnly: boolean;
  /** Disk use of the tree below hostDir (usage.ts) is reserved here; none: unlimited. */
  quota?: QuotaAccount;
}

export interface GuestFilesystemOptions {
  preopens: readonly PreopenDirectory[];
  /** Secret values by name, served read-only at SECRETS_PATH from memory. */
  secrets?: ReadonlyMap<string, string>;
  /** Descriptors and streams open at once (preopens not counted); past it `insufficient-memory`. Default 256. */
  maxOpenFiles?: number;
}

/**
 * The wasi:filesystem an invocation's guest gets. Each preopen is a directory fd opened now; the
 * guest reaches only what lies below those fds (see walk.ts) and, read-only, its secrets. revoke()
 * ends it: every fd it opened is closed and every descriptor and stream of it fails from then on.
 */
export class GuestFilesystem {
  readonly #table: FileTable;
  readonly #preopens: [Descriptor, string][] = [];

  /** Throws (an Error naming the guest path, never the host one) when a host directory cannot be opened. */
  constructor(options: GuestFilesystemOptions) {
    this.#table = new FileTable(options.maxOpenFiles ?? DEFAULT_MAX_OPEN_FILES);
    try {
      for (const preopen of options.preopens) {
        const handle = this.#table.hold(openDirectory(preopen));
        const grant = { readOnly: preopen.readOnly, account: preopen.quota ?? UNLIMITED, table: this.#table };
        this.#preopens.push([new Descriptor(new HostDirectory(handle, grant), this.#table, true), preopen.guestPath]);
      }
    } catch (error) {
      this.#table.revoke();
      throw error;
    }
    if (options.secrets) this.#preopens.push([new Descriptor(SecretDirectory.of(options.secrets), this.#table, true), SECRETS_PATH]);
  }

  /** wasi:filesystem/preopens#get-directories: the same descriptors each time; none once revoked. */
  preopens(): [Descriptor, string][] {
    return this.#table.revoked ? [] : [...this.#preopens];
  }

  revoke(): void {
    this.#table.revoke();
    this.#preopens.length = 0;
  }
}

function openDirectory({ guestPath, hostDir }: PreopenDirectory): number {
  try {
    return openSync(hostDir, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    throw new Error(`the host directory behind ${guestPath} cannot be opened (${errnoOf(error) ?? "error"})`);
  }
}
