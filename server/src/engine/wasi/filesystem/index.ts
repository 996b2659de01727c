// TEMPORARY adapter over fs-guard while the real implementation lands (replaced at merge).
import { Descriptor, filesystemTypes, type Grant } from "../fs-guard.ts";
export type { Descriptor };

export { filesystemTypes };
export interface QuotaAccount {
  reserve(bytes: number): boolean;
  release(bytes: number): void;
}
export class LocalQuota implements QuotaAccount {
  readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }
  used = 0;
  reserve(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }
  release(bytes: number): void {
    this.used -= bytes;
  }
}
export interface PreopenSpec {
  guestPath: string;
  hostDir: string;
  readOnly: boolean;
  quota?: QuotaAccount;
}
export class GuestFilesystem {
  readonly #grant: Grant = { revoked: false };
  #preopens: [Descriptor, string][];
  constructor(options: { preopens: PreopenSpec[]; secrets?: Map<string, string>; maxOpenFiles?: number }) {
    this.#preopens = options.preopens.map((spec) => [Descriptor.preopen(spec.hostDir, spec.readOnly, this.#grant), spec.guestPath]);
  }
  preopens(): [Descriptor, string][] {
    return [...this.#preopens];
  }
  revoke(): void {
    this.#grant.revoked = true;
    this.#preopens = [];
  }
}
