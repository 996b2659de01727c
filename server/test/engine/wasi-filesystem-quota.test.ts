// Disk-use quotas of the guest's wasi:filesystem: every growth is reserved first (and refused
// whole), every shrink released, and the account agrees with measureUsage of the tree.
import { linkSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ENTRY_BYTES,
  filesystemTypes,
  GuestFilesystem,
  LocalQuota,
  measureUsage,
  type Descriptor,
  type QuotaAccount,
} from "../../src/engine/wasi/filesystem/index.ts";
import { bytes, makeBox, mount, NOFOLLOW, READ, thrown, WRITE, type Box } from "../helpers/guest-filesystem.ts";

let box: Box;
let filesystem: GuestFilesystem;
let root: Descriptor;
let quota: LocalQuota;

/** A filesystem over the box's root with `limit` bytes of quota, starting from what is there. */
async function withQuota(limit: number): Promise<void> {
  filesystem?.revoke();
  quota = new LocalQuota(limit, await measureUsage(box.root));
  ({ filesystem, root } = mount(box.root, { quota }));
}

beforeEach(async () => {
  box = makeBox();
  writeFileSync(join(box.root, "ten.txt"), "0123456789");
  await withQuota(1024 * 1024);
});

afterEach(() => {
  filesystem.revoke();
  box.remove();
});

const open = (path: string, openFlags: Parameters<Descriptor["openAt"]>[2] = {}, flags: Parameters<Descriptor["openAt"]>[3] = WRITE) =>
  root.openAt(NOFOLLOW, path, openFlags, flags);

describe("LocalQuota", () => {
  it("reserves all or nothing and never goes below zero", async () => {
    const account = new LocalQuota(100, 40);
    expect(account.reserve(60)).toBe(true);
    expect(account.used).toBe(100);
    expect(account.reserve(1)).toBe(false);
    expect(account.used).toBe(100);
    expect(account.reserve(-1)).toBe(false);
    expect(account.reserve(Number.NaN)).toBe(false);
    account.release(30);
    expect(account.used).toBe(70);
    account.release(1000);
    expect(account.used).toBe(0);
  });
});

describe("measureUsage", () => {
  it("counts files' sizes once per inode, every entry, and follows no symlink", async () => {
    expect(await measureUsage(box.root)).toBe(ENTRY_BYTES + 10);
    mkdirSync(join(box.root, "d", "e"), { recursive: true });
    writeFileSync(join(box.root, "d", "e", "five"), "12345");
    linkSync(join(box.root, "ten.txt"), join(box.root, "d", "hard"));
    // A symlink to the box (with the outside marker in it) costs one entry, not what it points to.
    symlinkSync("../../../..", join(box.root, "up"));
    // ten.txt + d + d/e + d/e/five + d/hard + up, the 10 bytes once, 5 bytes once.
    expect(await measureUsage(box.root)).toBe(6 * ENTRY_BYTES + 10 + 5);
  });
});

describe("quota", () => {
  it("charges a write only for growth past the end, and refuses the write whole", async () => {
    await withQuota(quota.used + 20);
    const file = open("ten.txt");
    const start = quota.used;
    expect(file.write(bytes("abcde"), 0n)).toBe(5n);
    expect(quota.used).toBe(start);
    expect(file.write(bytes("XYZ"), 8n)).toBe(3n);
    expect(quota.used).toBe(start + 1);
    expect(thrown(() => file.write(bytes("x".repeat(31)), 0n))).toBe("quota");
    expect(thrown(() => file.write(bytes("!"), 40n))).toBe("quota");
    expect(readFileSync(join(box.root, "ten.txt"), "utf8")).toBe("abcde567XYZ");
    expect(quota.used).toBe(start + 1);
    expect(file.write(bytes("y".repeat(19)), 11n)).toBe(19n);
    expect(quota.used).toBe(quota.limit);
    expect(await measureUsage(box.root)).toBe(quota.used);
  });

  it("charges set-size growth and releases shrinking", async () => {
    await withQuota(quota.used + 100);
    const file = open("ten.txt");
    const start = quota.used;
    file.setSize(110n);
    expect(quota.used).toBe(start + 100);
    expect(thrown(() => file.setSize(111n))).toBe("quota");
    expect(statSync(join(box.root, "ten.txt")).size).toBe(110);
    file.setSize(4n);
    expect(quota.used).toBe(start - 6);
    expect(await measureUsage(box.root)).toBe(quota.used);
  });

  it("refuses a stream write past the quota with a failure whose code is quota, writing nothing", async () => {
    await withQuota(quota.used + 8);
    const stream = open("ten.txt").appendViaStream();
    stream.write(bytes("abc"));
    for (const action of [() => stream.write(bytes("0123456789")), () => stream.writeZeroes(6n), () => stream.blockingWriteZeroesAndFlush(100n)]) {
      const failure = thrown(action) as { tag: string; val: unknown };
      expect(failure.tag).toBe("last-operation-failed");
      expect(filesystemTypes.filesystemErrorCode(failure.val)).toBe("quota");
    }
    stream.writeZeroes(5n);
    expect(readFileSync(join(box.root, "ten.txt"))).toEqual(Buffer.from("0123456789abc\0\0\0\0\0"));
    expect(quota.used).toBe(quota.limit);
  });

  it("charges an entry for each file, directory, symlink and hard link created, and creates none without room", async () => {
    await withQuota(quota.used + 4 * ENTRY_BYTES);
    const start = quota.used;
    open("new.txt", { create: true });
    root.createDirectoryAt("dir");
    root.symlinkAt("../../../..", "dir/up");
    root.linkAt(NOFOLLOW, "ten.txt", root, "dir/hard");
    expect(quota.used).toBe(start + 4 * ENTRY_BYTES);
    // Opening what exists costs nothing.
    open("new.txt", { create: true });
    expect(quota.used).toBe(quota.limit);
    for (const action of [
      () => open("more.txt", { create: true }),
      () => open("more.txt", { create: true, exclusive: true }),
      () => root.createDirectoryAt("more"),
      () => root.symlinkAt("ten.txt", "more-link"),
      () => root.linkAt(NOFOLLOW, "ten.txt", root, "more-hard"),
    ]) {
      expect(thrown(action)).toBe("quota");
    }
    expect(readdirSync(box.root).sort()).toEqual(["dir", "new.txt", "ten.txt"]);
    expect(quota.used).toBe(quota.limit);
    expect(await measureUsage(box.root)).toBe(quota.used);
    // Creating what exists is `exist`, full or not (so `mkdir -p` over existing directories works).
    for (const action of [
      () => root.createDirectoryAt("dir"),
      () => root.symlinkAt("x", "new.txt"),
      () => open("new.txt", { create: true, exclusive: true }),
    ]) {
      expect(thrown(action)).toBe("exist");
    }
    expect(quota.used).toBe(quota.limit);
  });

  it("gives back the reservation of a create that fails for another reason", async () => {
    const start = quota.used;
    expect(thrown(() => root.createDirectoryAt("missing/dir"))).toBe("no-entry");
    expect(thrown(() => root.symlinkAt("x", "missing/link"))).toBe("no-entry");
    expect(thrown(() => root.linkAt(NOFOLLOW, "missing", root, "link"))).toBe("no-entry");
    expect(thrown(() => open("missing/file", { create: true }))).toBe("no-entry");
    expect(quota.used).toBe(start);
  });

  it("releases what unlink, rmdir, truncation and a replacing rename free", async () => {
    writeFileSync(join(box.root, "big.txt"), "x".repeat(1000));
    writeFileSync(join(box.root, "victim.txt"), "y".repeat(300));
    mkdirSync(join(box.root, "empty"));
    linkSync(join(box.root, "big.txt"), join(box.root, "big-link"));
    await withQuota(1024 * 1024);
    const check = async () => expect(await measureUsage(box.root)).toBe(quota.used);
    let before = quota.used;
    root.unlinkFileAt("big-link");
    expect(before - quota.used).toBe(ENTRY_BYTES);
    await check();
    before = quota.used;
    root.renameAt("ten.txt", root, "victim.txt");
    expect(before - quota.used).toBe(ENTRY_BYTES + 300);
    await check();
    before = quota.used;
    root.renameAt("victim.txt", root, "renamed.txt");
    expect(quota.used).toBe(before);
    await check();
    before = quota.used;
    open("big.txt", { truncate: true });
    expect(before - quota.used).toBe(1000);
    await check();
    before = quota.used;
    root.removeDirectoryAt("empty");
    expect(before - quota.used).toBe(ENTRY_BYTES);
    await check();
    before = quota.used;
    root.unlinkFileAt("renamed.txt");
    expect(before - quota.used).toBe(ENTRY_BYTES + 10);
    await check();
  });

  it("changes nothing when renaming one link of a file onto another", async () => {
    linkSync(join(box.root, "ten.txt"), join(box.root, "same"));
    await withQuota(1024 * 1024);
    const before = quota.used;
    root.renameAt("ten.txt", root, "same");
    expect(quota.used).toBe(before);
    expect(await measureUsage(box.root)).toBe(quota.used);
  });

  it("agrees with measureUsage after a mixed sequence", async () => {
    mkdirSync(join(box.root, "pre", "existing"), { recursive: true });
    writeFileSync(join(box.root, "pre", "existing", "a"), "a".repeat(123));
    await withQuota(10 * 1024 * 1024);
    const sub = open("pre", {}, READ);
    const file = sub.openAt(NOFOLLOW, "existing/b", { create: true }, WRITE);
    file.write(bytes("b".repeat(5000)), 0n);
    const stream = file.writeViaStream(4000n);
    stream.write(bytes("c".repeat(3000)));
    stream.writeZeroes(10n);
    stream[Symbol.dispose]();
    file.setSize(6500n);
    root.linkAt(NOFOLLOW, "pre/existing/b", sub, "b-link");
    root.symlinkAt("pre/existing/a", "a-link");
    root.createDirectoryAt("made");
    root.renameAt("pre/existing/a", root, "made/a");
    root.renameAt("made/a", sub, "b-link");
    open("made/new", { create: true }).write(bytes("n".repeat(77)), 0n);
    sub.unlinkFileAt("existing/b");
    root.renameAt("ten.txt", root, "made/new");
    root.removeDirectoryAt("pre/existing");
    file.write(bytes("after unlink"), 0n);
    open("made/trunc", { create: true, truncate: true }).setSize(42n);
    expect(await measureUsage(box.root)).toBe(quota.used);
  });

  it("moves a file's usage between accounts, and refuses directories and links across them as another device", async () => {
    mkdirSync(join(box.root, "scratch"));
    const workspaceQuota = new LocalQuota(1024 * 1024, await measureUsage(box.root));
    const scratchQuota: QuotaAccount & { used: number } = new LocalQuota(1024 * 1024, 0);
    filesystem.revoke();
    filesystem = new GuestFilesystem({
      preopens: [
        { guestPath: "/workspace", hostDir: box.root, readOnly: false, quota: workspaceQuota },
        { guestPath: "/scratch", hostDir: join(box.root, "scratch"), readOnly: false, quota: scratchQuota },
      ],
    });
    const [[workspace], [scratch]] = filesystem.preopens() as [[Descriptor, string], [Descriptor, string]];
    const file = scratch.openAt(NOFOLLOW, "result.txt", { create: true }, WRITE);
    file.write(bytes("r".repeat(500)), 0n);
    expect(scratchQuota.used).toBe(ENTRY_BYTES + 500);
    const workspaceBefore = workspaceQuota.used;
    scratch.renameAt("result.txt", workspace, "result.txt");
    expect(scratchQuota.used).toBe(0);
    expect(workspaceQuota.used).toBe(workspaceBefore + ENTRY_BYTES + 500);
    scratch.createDirectoryAt("dir");
    expect(thrown(() => scratch.renameAt("dir", workspace, "dir"))).toBe("cross-device");
    expect(thrown(() => workspace.linkAt(NOFOLLOW, "ten.txt", scratch, "ten.txt"))).toBe("cross-device");
    // Without room on the other side, the file stays where it was.
    const tight = new GuestFilesystem({
      preopens: [
        { guestPath: "/workspace", hostDir: box.root, readOnly: false, quota: new LocalQuota(0) },
        { guestPath: "/scratch", hostDir: join(box.root, "scratch"), readOnly: false, quota: scratchQuota },
      ],
    });
    const [[full], [roomy]] = tight.preopens() as [[Descriptor, string], [Descriptor, string]];
    roomy.openAt(NOFOLLOW, "kept.txt", { create: true }, WRITE);
    expect(thrown(() => roomy.renameAt("kept.txt", full, "kept.txt"))).toBe("quota");
    expect(readdirSync(join(box.root, "scratch")).sort()).toEqual(["dir", "kept.txt"]);
    tight.revoke();
  });
});
