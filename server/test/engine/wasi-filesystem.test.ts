// The guest's wasi:filesystem, called as jco's glue calls it: every Descriptor method's result and
// its refusals, in temp directories. Attacks are in wasi-filesystem-attacks.test.ts, quotas in
// wasi-filesystem-quota.test.ts.
import { execFileSync } from "node:child_process";
import { linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as shim from "@bytecodealliance/preview2-shim";
import { filesystemTypes, GuestFilesystem, ioStreams, Pollable, type Descriptor } from "../../src/engine/wasi/filesystem/index.ts";
import { bytes, entries, FOLLOW, makeBox, mount, NOFOLLOW, openFds, READ, readAll, text, thrown, WRITE, type Box } from "../helpers/guest-filesystem.ts";

let box: Box;
let filesystem: GuestFilesystem;
let root: Descriptor;

beforeEach(() => {
  box = makeBox();
  writeFileSync(join(box.root, "hello.txt"), "hello world");
  mkdirSync(join(box.root, "sub", "deeper"), { recursive: true });
  writeFileSync(join(box.root, "sub", "inner.txt"), "inner");
  symlinkSync("hello.txt", join(box.root, "link-to-file"));
  symlinkSync("sub", join(box.root, "link-to-dir"));
  symlinkSync("missing.txt", join(box.root, "dangling"));
  ({ filesystem, root } = mount(box.root));
});

afterEach(() => {
  filesystem.revoke();
  box.remove();
});

const open = (path: string, flags: Parameters<Descriptor["openAt"]>[3] = READ, openFlags: Parameters<Descriptor["openAt"]>[2] = {}, pathFlags = NOFOLLOW) =>
  root.openAt(pathFlags, path, openFlags, flags);

describe("paths", () => {
  it("resolves nested names, '.', '//' and '..' that stay inside", () => {
    for (const path of ["sub/inner.txt", "./sub/inner.txt", "sub//inner.txt", "sub/./inner.txt", "sub/deeper/../inner.txt", "sub/../sub/inner.txt"]) {
      expect(readAll(open(path)), path).toBe("inner");
    }
    expect(readAll(open("sub/../hello.txt"))).toBe("hello world");
  });

  it("refuses '..' above the descriptor, from a preopen and from a directory opened below it", () => {
    const sub = open("sub", READ, { directory: true });
    for (const [descriptor, path] of [
      [root, ".."],
      [root, "../root/hello.txt"],
      [root, "sub/../../root/hello.txt"],
      [sub, ".."],
      [sub, "../hello.txt"],
      [sub, "deeper/../../hello.txt"],
    ] as const) {
      expect(
        thrown(() => descriptor.openAt(NOFOLLOW, path, {}, READ)),
        path,
      ).toBe("not-permitted");
      expect(
        thrown(() => descriptor.statAt(NOFOLLOW, path)),
        path,
      ).toBe("not-permitted");
    }
  });

  it("refuses absolute paths, names nothing with an empty path, and finds '.' to be the directory itself", () => {
    for (const path of ["/", "/hello.txt", "//hello.txt", box.root, join(box.root, "hello.txt")])
      expect(
        thrown(() => open(path)),
        path,
      ).toBe("not-permitted");
    expect(thrown(() => open(""))).toBe("no-entry");
    expect(root.statAt(NOFOLLOW, ".").type).toBe("directory");
    expect(root.statAt(NOFOLLOW, "sub/..").type).toBe("directory");
    expect(entries(open(".", READ, { directory: true })).map((entry) => entry.name)).toContain("hello.txt");
  });

  it("answers `invalid` for a NUL byte or ill-formed text and `name-too-long` for long names, naming no host path", () => {
    const cases: [() => unknown, string][] = [
      [() => open("a\0b"), "invalid"],
      [() => open("sub/\0"), "invalid"],
      [() => root.statAt(NOFOLLOW, "hello.txt\0"), "invalid"],
      [() => root.createDirectoryAt("x\0"), "invalid"],
      [() => root.symlinkAt("target\0", "x"), "invalid"],
      [() => root.symlinkAt("target", "x\0"), "invalid"],
      [() => root.renameAt("hello.txt", root, "y\0"), "invalid"],
      [() => root.unlinkFileAt("\ud800"), "invalid"],
      [() => root.readlinkAt(42 as unknown as string), "invalid"],
      [() => open("x".repeat(256)), "name-too-long"],
      [() => open("a/".repeat(2100)), "name-too-long"],
    ];
    for (const [action, code] of cases) {
      const error = thrown(action);
      expect(error).toBe(code);
      expect(typeof error).toBe("string");
    }
    expect(readdirSync(box.root).sort()).toEqual(["dangling", "hello.txt", "link-to-dir", "link-to-file", "sub"]);
  });

  it("treats a trailing '/' as 'must be a directory' and a backslash as an ordinary character", () => {
    expect(thrown(() => open("hello.txt/"))).toBe("not-directory");
    expect(thrown(() => root.statAt(NOFOLLOW, "hello.txt/"))).toBe("not-directory");
    expect(open("sub/").getType()).toBe("directory");
    expect(root.statAt(NOFOLLOW, "link-to-dir/").type).toBe("directory");
    writeFileSync(join(box.root, "back\\slash"), "b");
    expect(readAll(open("back\\slash"))).toBe("b");
    expect(thrown(() => open("sub\\inner.txt"))).toBe("no-entry");
  });
});

describe("openAt", () => {
  it("opens files and directories, and refuses what the flags rule out", () => {
    expect(readAll(open("hello.txt"))).toBe("hello world");
    expect(open("sub", READ, { directory: true }).getType()).toBe("directory");
    expect(open("sub").getType()).toBe("directory");
    expect(thrown(() => open("hello.txt", READ, { directory: true }))).toBe("not-directory");
    expect(thrown(() => open("missing"))).toBe("no-entry");
    expect(thrown(() => open("sub", WRITE))).toBe("is-directory");
    expect(thrown(() => open("sub", READ, { truncate: true }))).toBe("is-directory");
    expect(thrown(() => open("new", READ, { create: true, directory: true }))).toBe("invalid");
    for (const flag of ["fileIntegritySync", "dataIntegritySync", "requestedWriteSync"])
      expect(thrown(() => open("hello.txt", { read: true, [flag]: true }))).toBe("unsupported");
  });

  it("creates, truncates and refuses an exclusive create of what exists", () => {
    const created = open("new.txt", WRITE, { create: true });
    created.write(bytes("fresh"), 0n);
    expect(readFileSync(join(box.root, "new.txt"), "utf8")).toBe("fresh");
    expect(readAll(open("new.txt", WRITE, { create: true }))).toBe("fresh");
    expect(thrown(() => open("new.txt", WRITE, { create: true, exclusive: true }))).toBe("exist");
    expect(thrown(() => open("dangling", WRITE, { create: true, exclusive: true }))).toBe("exist");
    open("new.txt", WRITE, { truncate: true });
    expect(readFileSync(join(box.root, "new.txt"), "utf8")).toBe("");
    // As open(2) does: creating or truncating needs no write access.
    open("made-read-only.txt", READ, { create: true });
    expect(statSync(join(box.root, "made-read-only.txt")).isFile()).toBe(true);
    open("hello.txt", READ, { truncate: true });
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("");
  });

  it("follows a last symlink only when asked, and a symlink on the way always", () => {
    expect(thrown(() => open("link-to-file"))).toBe("loop");
    expect(readAll(open("link-to-file", READ, {}, FOLLOW))).toBe("hello world");
    expect(open("link-to-dir", READ, { directory: true }, FOLLOW).getType()).toBe("directory");
    expect(thrown(() => open("link-to-dir", READ, { directory: true }))).toBe("not-directory");
    expect(readAll(open("link-to-dir/inner.txt"))).toBe("inner");
    expect(thrown(() => open("dangling", READ, {}, FOLLOW))).toBe("no-entry");
    // Creating through a dangling last symlink creates its target, inside.
    open("dangling", WRITE, { create: true }, FOLLOW).write(bytes("via link"), 0n);
    expect(readFileSync(join(box.root, "missing.txt"), "utf8")).toBe("via link");
    symlinkSync("loop-b", join(box.root, "loop-a"));
    symlinkSync("loop-a", join(box.root, "loop-b"));
    expect(thrown(() => open("loop-a", READ, {}, FOLLOW))).toBe("loop");
    expect(thrown(() => open("loop-a/x"))).toBe("loop");
  });

  it("gives a descriptor of its own for '.', and accepts mutate-directory on a writable preopen", () => {
    const again = open(".", { read: true, mutateDirectory: true }, { directory: true });
    expect(again.getFlags()).toEqual({ read: true, mutateDirectory: true });
    expect(again.isSameObject(root)).toBe(true);
    expect(thrown(() => open(".", WRITE))).toBe("is-directory");
    expect(thrown(() => open(".", READ, { create: true, exclusive: true }))).toBe("exist");
  });

  it("opens a FIFO someone left in the tree without blocking", () => {
    execFileSync("mkfifo", [join(box.root, "fifo")]);
    const fifo = open("fifo");
    expect(fifo.getType()).toBe("fifo");
    expect(thrown(() => fifo.read(10n, 0n))).toMatch(/invalid-seek|would-block/);
  });
});

describe("files", () => {
  it("reads and writes at offsets, reporting the end of the file", () => {
    const file = open("hello.txt", WRITE);
    expect(text(file.read(5n, 0n)[0])).toBe("hello");
    expect(file.read(5n, 0n)[1]).toBe(false);
    expect(text(file.read(100n, 6n)[0])).toBe("world");
    expect(file.read(100n, 11n)).toEqual([new Uint8Array(0), true]);
    expect(file.read(100n, 1000n)).toEqual([new Uint8Array(0), true]);
    expect(file.write(bytes("W"), 6n)).toBe(1n);
    expect(file.write(bytes("!"), 20n)).toBe(1n);
    expect(readFileSync(join(box.root, "hello.txt"))).toEqual(Buffer.concat([Buffer.from("hello World"), Buffer.alloc(9), Buffer.from("!")]));
    expect(file.stat()).toMatchObject({ type: "regular-file", linkCount: 1n, size: 21n });
    expect(thrown(() => file.read(1n, -1n as bigint))).toBe("invalid");
    expect(thrown(() => open("hello.txt").write(bytes("x"), 0n))).toBe("bad-descriptor");
  });

  it("sets sizes and times, syncs, takes advice, and reports type, flags and metadata hashes", () => {
    const file = open("hello.txt", WRITE);
    file.setSize(5n);
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("hello");
    file.setSize(8n);
    expect(statSync(join(box.root, "hello.txt")).size).toBe(8);
    file.setTimes(
      { tag: "timestamp", val: { seconds: 1_000_000n, nanoseconds: 500_000_000 } },
      { tag: "timestamp", val: { seconds: 2_000_000n, nanoseconds: 0 } },
    );
    let stat = file.stat();
    expect(stat.dataAccessTimestamp).toEqual({ seconds: 1_000_000n, nanoseconds: 500_000_000 });
    expect(stat.dataModificationTimestamp).toEqual({ seconds: 2_000_000n, nanoseconds: 0 });
    file.setTimes({ tag: "no-change" }, { tag: "now" });
    stat = file.stat();
    expect(stat.dataAccessTimestamp).toEqual({ seconds: 1_000_000n, nanoseconds: 500_000_000 });
    expect(stat.dataModificationTimestamp!.seconds).toBeGreaterThan(2_000_000n);
    expect(thrown(() => file.setTimes({ tag: "timestamp", val: { seconds: 1n, nanoseconds: 1e9 } }, { tag: "now" }))).toBe("invalid");
    file.sync();
    file.syncData();
    file.advise(0n, 10n, "sequential");
    expect(thrown(() => file.advise(0n, 10n, "sideways" as "normal"))).toBe("invalid");
    expect(file.getType()).toBe("regular-file");
    expect(file.getFlags()).toEqual({ read: true, write: true });
    expect(open("hello.txt").getFlags()).toEqual({ read: true, write: false });
    const before = file.metadataHash();
    expect(open("hello.txt").metadataHash()).toEqual(before);
    expect(root.metadataHashAt(NOFOLLOW, "hello.txt")).toEqual(before);
    expect(root.metadataHashAt(NOFOLLOW, "sub/inner.txt")).not.toEqual(before);
  });

  it("tells the same object from another, through any descriptor or hard link", () => {
    linkSync(join(box.root, "hello.txt"), join(box.root, "hard"));
    const file = open("hello.txt");
    expect(file.isSameObject(open("hello.txt"))).toBe(true);
    expect(file.isSameObject(open("hard"))).toBe(true);
    expect(file.isSameObject(open("sub/inner.txt"))).toBe(false);
    expect(file.isSameObject(root)).toBe(false);
    expect(root.isSameObject(open("sub/.."))).toBe(true);
  });

  it("refuses file operations on a directory and directory operations on a file", () => {
    const sub = open("sub");
    expect(thrown(() => sub.read(1n, 0n))).toBe("bad-descriptor");
    expect(thrown(() => sub.write(bytes("x"), 0n))).toBe("bad-descriptor");
    expect(thrown(() => sub.advise(0n, 0n, "normal"))).toBe("bad-descriptor");
    expect(thrown(() => sub.setSize(0n))).toBe("is-directory");
    expect(thrown(() => sub.readViaStream(0n))).toBe("is-directory");
    expect(thrown(() => sub.writeViaStream(0n))).toBe("is-directory");
    expect(thrown(() => sub.appendViaStream())).toBe("is-directory");
    const file = open("hello.txt");
    expect(thrown(() => file.openAt(NOFOLLOW, ".", {}, READ))).toBe("not-directory");
    expect(thrown(() => file.readDirectory())).toBe("not-directory");
    expect(thrown(() => file.statAt(NOFOLLOW, "x"))).toBe("not-directory");
    expect(thrown(() => file.createDirectoryAt("x"))).toBe("not-directory");
    expect(thrown(() => file.unlinkFileAt("x"))).toBe("not-directory");
    expect(thrown(() => root.renameAt("hello.txt", file, "x"))).toBe("not-directory");
  });

  it("works on directories too: stat, times, sync and metadata hash of a preopen", () => {
    expect(root.stat().type).toBe("directory");
    expect(root.getType()).toBe("directory");
    root.setTimes({ tag: "timestamp", val: { seconds: 12345n, nanoseconds: 0 } }, { tag: "timestamp", val: { seconds: 12345n, nanoseconds: 0 } });
    expect(statSync(box.root).mtimeMs).toBe(12345000);
    root.sync();
    root.syncData();
    expect(root.metadataHash()).toEqual(open(".").metadataHash());
  });
});

describe("streams", () => {
  it("reads from an offset to `closed`, skips, and is always ready", () => {
    const stream = open("hello.txt").readViaStream(2n);
    expect(stream instanceof ioStreams.InputStream).toBe(true);
    expect(text(stream.read(3n))).toBe("llo");
    expect(stream.skip(2n)).toBe(2n);
    expect(text(stream.blockingRead(100n))).toBe("orld");
    expect(stream.read(0n)).toEqual(new Uint8Array(0));
    expect(thrown(() => stream.read(1n))).toEqual({ tag: "closed" });
    expect(thrown(() => stream.blockingSkip(1n))).toEqual({ tag: "closed" });
    const pollable = stream.subscribe();
    expect(pollable instanceof Pollable).toBe(true);
    expect(pollable.ready()).toBe(true);
    pollable.block();
    stream[Symbol.dispose]();
  });

  it("writes, zeroes, splices and appends, with the whole output-stream method set", () => {
    const file = open("out.txt", WRITE, { create: true });
    const stream = file.writeViaStream(0n);
    expect(stream instanceof ioStreams.OutputStream).toBe(true);
    expect(stream.checkWrite()).toBeGreaterThan(4096n);
    stream.write(bytes("ab"));
    stream.blockingWriteAndFlush(bytes("cd"));
    stream.flush();
    stream.blockingFlush();
    stream.writeZeroes(2n);
    stream.blockingWriteZeroesAndFlush(1n);
    expect(stream.splice(open("hello.txt").readViaStream(0n), 5n)).toBe(5n);
    expect(stream.blockingSplice(open("hello.txt").readViaStream(6n), 100n)).toBe(5n);
    expect(stream.subscribe().ready()).toBe(true);
    expect(readFileSync(join(box.root, "out.txt"))).toEqual(Buffer.from("abcd\0\0\0helloworld"));
    const append = file.appendViaStream();
    file.write(bytes("XYZ"), 17n);
    append.write(bytes("+"));
    expect(readFileSync(join(box.root, "out.txt"), "utf8")).toBe("abcd\0\0\0helloworldXYZ+");
    expect(thrown(() => stream.splice(open("sub/inner.txt").readViaStream(5n), 1n))).toEqual({ tag: "closed" });
  });

  it("fails with a wasi:io error whose filesystem-error-code says why", () => {
    const writeOnly = open("hello.txt", { write: true });
    const failure = thrown(() => writeOnly.readViaStream(0n).read(1n)) as { tag: string; val: unknown };
    expect(failure.tag).toBe("last-operation-failed");
    expect(failure.val).toBeInstanceOf((shim as unknown as { io: { error: { Error: new () => object } } }).io.error.Error);
    expect(filesystemTypes.filesystemErrorCode(failure.val)).toBe("bad-descriptor");
    expect(String((failure.val as { toDebugString(): string }).toDebugString())).not.toContain(box.root);
    expect(thrown(() => open("hello.txt").writeViaStream(0n))).toBe("bad-descriptor");
    expect(filesystemTypes.filesystemErrorCode({})).toBeUndefined();
    expect(filesystemTypes.filesystemErrorCode(undefined)).toBeUndefined();
  });

  it("keeps its file open after the descriptor is dropped, and closes it with the last reference", () => {
    const baseline = openFds(box);
    const file = open("hello.txt", WRITE);
    const input = file.readViaStream(0n);
    const output = file.appendViaStream();
    file[Symbol.dispose]();
    expect(thrown(() => file.read(1n, 0n))).toBe("bad-descriptor");
    expect(text(input.read(5n))).toBe("hello");
    output.write(bytes("!"));
    expect(openFds(box)).toBe(baseline + 1);
    input[Symbol.dispose]();
    expect(openFds(box)).toBe(baseline + 1);
    output[Symbol.dispose]();
    expect(openFds(box)).toBe(baseline);
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("hello world!");
    expect(thrown(() => input.read(1n))).toMatchObject({ tag: "last-operation-failed" });
  });

  it("splices into preview2-shim's streams, whose own splice knows only its streams", () => {
    const shimFilesystem = (shim as unknown as { filesystem: { _createPreopenDescriptor(path: string): Descriptor } }).filesystem;
    const shimRoot = shimFilesystem._createPreopenDescriptor(box.root);
    const destination = shimRoot.openAt(NOFOLLOW, "spliced.txt", { create: true }, { write: true }).writeViaStream(0n);
    expect(destination instanceof ioStreams.OutputStream).toBe(true);
    expect(destination.splice(open("hello.txt").readViaStream(0n), 5n)).toBe(5n);
    expect(destination.blockingSplice(open("hello.txt").readViaStream(5n), 100n)).toBe(6n);
    destination.blockingFlush();
    expect(readFileSync(join(box.root, "spliced.txt"), "utf8")).toBe("hello world");
  });

  it("stands for preview2-shim's streams and pollables too", () => {
    const io = shim as unknown as { cli: { stdout: { getStdout(): unknown } }; clocks: { monotonicClock: { subscribeDuration(ns: bigint): unknown } } };
    expect(io.cli.stdout.getStdout() instanceof ioStreams.OutputStream).toBe(true);
    expect(io.cli.stdout.getStdout() instanceof ioStreams.InputStream).toBe(false);
    expect(io.clocks.monotonicClock.subscribeDuration(0n) instanceof Pollable).toBe(true);
    expect(open("hello.txt").readViaStream(0n) instanceof ioStreams.OutputStream).toBe(false);
    expect({} instanceof Pollable).toBe(false);
  });
});

describe("directories", () => {
  it("creates, lists and removes directories", () => {
    root.createDirectoryAt("made");
    root.createDirectoryAt("made/inside");
    expect(statSync(join(box.root, "made", "inside")).isDirectory()).toBe(true);
    expect(thrown(() => root.createDirectoryAt("made"))).toBe("exist");
    expect(thrown(() => root.createDirectoryAt("."))).toBe("exist");
    expect(thrown(() => root.createDirectoryAt("nowhere/x"))).toBe("no-entry");
    expect(thrown(() => root.removeDirectoryAt("made"))).toBe("not-empty");
    expect(thrown(() => root.removeDirectoryAt("hello.txt"))).toBe("not-directory");
    expect(thrown(() => root.removeDirectoryAt("link-to-dir"))).toBe("not-directory");
    expect(thrown(() => root.removeDirectoryAt("."))).toBe("invalid");
    root.removeDirectoryAt("made/inside");
    root.removeDirectoryAt("made/");
    expect(readdirSync(box.root)).not.toContain("made");
    expect(entries(root)).toEqual([
      { name: "dangling", type: "symbolic-link" },
      { name: "hello.txt", type: "regular-file" },
      { name: "link-to-dir", type: "symbolic-link" },
      { name: "link-to-file", type: "symbolic-link" },
      { name: "sub", type: "directory" },
    ]);
    expect(entries(open("sub"))).toEqual([
      { name: "deeper", type: "directory" },
      { name: "inner.txt", type: "regular-file" },
    ]);
  });

  it("reports a name that is not UTF-8 as illegal-byte-sequence and lists the rest", () => {
    writeFileSync(Buffer.concat([Buffer.from(`${box.root}/sub/deeper/`), Buffer.from([0x66, 0xff, 0x66])]), "x");
    writeFileSync(join(box.root, "sub", "deeper", "ok"), "x");
    const stream = open("sub/deeper").readDirectory();
    const seen: unknown[] = [];
    for (let i = 0; i < 3; i++) seen.push(thrown(() => seen.push(stream.readDirectoryEntry())) ?? "entry");
    expect(seen).toContainEqual("illegal-byte-sequence");
    expect(seen).toContainEqual({ name: "ok", type: "regular-file" });
    expect(stream.readDirectoryEntry()).toBeUndefined();
  });

  it("stats and hashes a last symlink or what it points to", () => {
    expect(root.statAt(NOFOLLOW, "link-to-file").type).toBe("symbolic-link");
    expect(root.statAt(FOLLOW, "link-to-file")).toMatchObject({ type: "regular-file", size: 11n });
    expect(root.statAt(FOLLOW, "link-to-dir").type).toBe("directory");
    expect(thrown(() => root.statAt(FOLLOW, "dangling"))).toBe("no-entry");
    expect(root.metadataHashAt(FOLLOW, "link-to-file")).toEqual(root.metadataHashAt(NOFOLLOW, "hello.txt"));
    expect(root.metadataHashAt(NOFOLLOW, "link-to-file")).not.toEqual(root.metadataHashAt(NOFOLLOW, "hello.txt"));
  });

  it("sets times on a name, on a symlink itself unless following it", () => {
    const when = { tag: "timestamp", val: { seconds: 7_000_000n, nanoseconds: 0 } } as const;
    root.setTimesAt(NOFOLLOW, "sub/inner.txt", when, when);
    expect(statSync(join(box.root, "sub", "inner.txt")).mtimeMs).toBe(7_000_000_000);
    root.setTimesAt(NOFOLLOW, "link-to-file", when, when);
    expect(lstatSync(join(box.root, "link-to-file")).mtimeMs).toBe(7_000_000_000);
    expect(statSync(join(box.root, "hello.txt")).mtimeMs).not.toBe(7_000_000_000);
    root.setTimesAt(FOLLOW, "link-to-file", { tag: "no-change" }, when);
    expect(statSync(join(box.root, "hello.txt")).mtimeMs).toBe(7_000_000_000);
    expect(thrown(() => root.setTimesAt(NOFOLLOW, "missing", when, when))).toBe("no-entry");
  });

  it("links files (following an old symlink when asked), never directories", () => {
    root.linkAt(NOFOLLOW, "hello.txt", open("sub"), "hard.txt");
    expect(statSync(join(box.root, "sub", "hard.txt")).nlink).toBe(2);
    root.linkAt(FOLLOW, "link-to-file", root, "hard-2.txt");
    expect(statSync(join(box.root, "hello.txt")).nlink).toBe(3);
    root.linkAt(NOFOLLOW, "link-to-file", root, "link-copy");
    expect(readlinkSync(join(box.root, "link-copy"))).toBe("hello.txt");
    expect(thrown(() => root.linkAt(NOFOLLOW, "sub", root, "sub-link"))).toBe("not-permitted");
    expect(thrown(() => root.linkAt(NOFOLLOW, "hello.txt", root, "sub/inner.txt"))).toBe("exist");
    expect(thrown(() => root.linkAt(NOFOLLOW, "missing", root, "x"))).toBe("no-entry");
    expect(thrown(() => root.linkAt(NOFOLLOW, "hello.txt", {} as Descriptor, "x"))).toBe("bad-descriptor");
  });

  it("reads links, renames and unlinks, and makes symlinks with any text", () => {
    expect(root.readlinkAt("link-to-file")).toBe("hello.txt");
    expect(thrown(() => root.readlinkAt("hello.txt"))).toBe("invalid");
    expect(thrown(() => root.readlinkAt("missing"))).toBe("no-entry");
    for (const [target, name] of [
      ["../../../..", "up"],
      ["/etc/passwd", "absolute"],
      ["any text at all", "text"],
    ]) {
      root.symlinkAt(target!, name!);
      expect(readlinkSync(join(box.root, name!))).toBe(target);
      expect(root.readlinkAt(name!)).toBe(target);
    }
    expect(thrown(() => root.symlinkAt("x", "hello.txt"))).toBe("exist");
    expect(thrown(() => root.symlinkAt("", "empty"))).toBe("no-entry");
    root.renameAt("hello.txt", open("sub"), "moved.txt");
    expect(readFileSync(join(box.root, "sub", "moved.txt"), "utf8")).toBe("hello world");
    root.renameAt("sub/moved.txt", root, "sub/inner.txt");
    expect(readFileSync(join(box.root, "sub", "inner.txt"), "utf8")).toBe("hello world");
    root.renameAt("sub", root, "sub-renamed");
    expect(thrown(() => root.renameAt("missing", root, "x"))).toBe("no-entry");
    expect(thrown(() => root.renameAt(".", root, "x"))).toBe("busy");
    root.unlinkFileAt("link-to-dir");
    expect(readdirSync(box.root)).not.toContain("link-to-dir");
    expect(statSync(join(box.root, "sub-renamed")).isDirectory()).toBe(true);
    expect(thrown(() => root.unlinkFileAt("sub-renamed"))).toBe("is-directory");
    expect(thrown(() => root.unlinkFileAt("sub-renamed/inner.txt/"))).toBe("not-directory");
    root.unlinkFileAt("sub-renamed/inner.txt");
    expect(readdirSync(join(box.root, "sub-renamed"))).toEqual(["deeper"]);
  });
});

describe("read-only preopens", () => {
  it("refuse every change, through the preopen and every descriptor opened through it", () => {
    filesystem.revoke();
    ({ filesystem, root } = mount(box.root, { readOnly: true }));
    const sub = open("sub", READ, { directory: true });
    const file = open("hello.txt");
    const when = { tag: "now" } as const;
    const refusals: [string, () => unknown][] = [
      ["create", () => open("new.txt", READ, { create: true })],
      ["truncate", () => open("hello.txt", READ, { truncate: true })],
      ["exclusive", () => open("hello.txt", READ, { exclusive: true })],
      ["write", () => open("hello.txt", { write: true })],
      ["mutate", () => open("sub", { read: true, mutateDirectory: true })],
      ["mkdir", () => root.createDirectoryAt("new")],
      ["mkdir below", () => sub.createDirectoryAt("new")],
      ["unlink", () => root.unlinkFileAt("hello.txt")],
      ["rmdir", () => root.removeDirectoryAt("sub/deeper")],
      ["rename", () => root.renameAt("hello.txt", root, "x")],
      ["rename below", () => sub.renameAt("inner.txt", sub, "x")],
      ["link", () => root.linkAt(NOFOLLOW, "hello.txt", root, "x")],
      ["symlink", () => root.symlinkAt("hello.txt", "x")],
      ["set-times-at", () => root.setTimesAt(NOFOLLOW, "hello.txt", when, when)],
      ["set-times", () => file.setTimes(when, when)],
      ["set-times dir", () => root.setTimes(when, when)],
      ["write", () => file.write(bytes("x"), 0n)],
      ["set-size", () => file.setSize(0n)],
      ["write stream", () => file.writeViaStream(0n)],
      ["append stream", () => file.appendViaStream()],
    ];
    for (const [what, action] of refusals) expect(thrown(action), what).toBe("read-only");
    expect(root.getFlags()).toEqual({ read: true, mutateDirectory: false });
    expect(sub.getFlags()).toEqual({ read: true, mutateDirectory: false });
    expect(file.getFlags()).toEqual({ read: true, write: false });
    expect(readAll(file)).toBe("hello world");
    expect(readdirSync(box.root).sort()).toEqual(["dangling", "hello.txt", "link-to-dir", "link-to-file", "sub"]);
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("hello world");
  });

  it("refuse to be the other side of a rename or link from a writable one", () => {
    const other = makeBox();
    try {
      const readOnly = new GuestFilesystem({ preopens: [{ guestPath: "/r", hostDir: other.root, readOnly: true }] });
      const [[target]] = readOnly.preopens() as [[Descriptor, string]];
      // Descriptors of another invocation are not this one's to use.
      expect(thrown(() => root.renameAt("hello.txt", target, "x"))).toBe("bad-descriptor");
      readOnly.revoke();
    } finally {
      other.remove();
    }
    const both = new GuestFilesystem({
      preopens: [
        { guestPath: "/w", hostDir: box.root, readOnly: false },
        { guestPath: "/r", hostDir: join(box.root, "sub"), readOnly: true },
      ],
    });
    const [[writable], [readOnly]] = both.preopens() as [[Descriptor, string], [Descriptor, string]];
    expect(thrown(() => writable.renameAt("hello.txt", readOnly, "x"))).toBe("read-only");
    expect(thrown(() => writable.linkAt(NOFOLLOW, "hello.txt", readOnly, "x"))).toBe("read-only");
    expect(thrown(() => readOnly.renameAt("inner.txt", writable, "x"))).toBe("read-only");
    writable.renameAt("hello.txt", writable, "sub/moved.txt");
    expect(readAll(readOnly.openAt(NOFOLLOW, "moved.txt", {}, READ))).toBe("hello world");
    both.revoke();
  });
});

describe("secrets", () => {
  const secrets = new Map([
    ["API_TOKEN", "t0ps3cret"],
    ["OTHER", "ünïcode"],
  ]);

  function secretsDirectory(): Descriptor {
    filesystem.revoke();
    filesystem = new GuestFilesystem({ preopens: [], secrets });
    const preopens = filesystem.preopens();
    expect(preopens.map(([, path]) => path)).toEqual(["/secrets"]);
    return preopens[0]![0];
  }

  it("are files in memory: listed, stat-ed, read and streamed", () => {
    const dir = secretsDirectory();
    expect(entries(dir)).toEqual([
      { name: "API_TOKEN", type: "regular-file" },
      { name: "OTHER", type: "regular-file" },
    ]);
    expect(dir.stat().type).toBe("directory");
    expect(dir.getType()).toBe("directory");
    expect(dir.getFlags()).toEqual({ read: true });
    expect(dir.statAt(NOFOLLOW, "OTHER")).toMatchObject({ type: "regular-file", size: BigInt(Buffer.byteLength("ünïcode")) });
    const token = dir.openAt(FOLLOW, "API_TOKEN", {}, READ);
    expect(readAll(token)).toBe("t0ps3cret");
    expect(token.getType()).toBe("regular-file");
    expect(token.getFlags()).toEqual({ read: true, write: false });
    expect(text(token.read(3n, 6n)[0])).toBe("ret");
    const stream = token.readViaStream(2n);
    expect(text(stream.read(100n))).toBe("ps3cret");
    expect(thrown(() => stream.read(1n))).toEqual({ tag: "closed" });
    expect(token.isSameObject(dir.openAt(NOFOLLOW, "API_TOKEN", {}, READ))).toBe(true);
    expect(token.isSameObject(dir.openAt(NOFOLLOW, "OTHER", {}, READ))).toBe(false);
    expect(dir.openAt(NOFOLLOW, ".", { directory: true }, READ).isSameObject(dir)).toBe(true);
    expect(dir.metadataHashAt(NOFOLLOW, "API_TOKEN")).toEqual(token.metadataHash());
  });

  it("refuse every change and every way out", () => {
    const dir = secretsDirectory();
    const token = dir.openAt(NOFOLLOW, "API_TOKEN", {}, READ);
    const when = { tag: "now" } as const;
    for (const [what, action, code] of [
      ["write open", () => dir.openAt(NOFOLLOW, "API_TOKEN", {}, WRITE), "read-only"],
      ["create", () => dir.openAt(NOFOLLOW, "NEW", { create: true }, READ), "read-only"],
      ["mkdir", () => dir.createDirectoryAt("x"), "read-only"],
      ["unlink", () => dir.unlinkFileAt("API_TOKEN"), "read-only"],
      ["rmdir", () => dir.removeDirectoryAt("x"), "read-only"],
      ["rename", () => dir.renameAt("API_TOKEN", dir, "x"), "read-only"],
      ["link", () => dir.linkAt(NOFOLLOW, "API_TOKEN", dir, "x"), "read-only"],
      ["symlink", () => dir.symlinkAt("API_TOKEN", "x"), "read-only"],
      ["set-times-at", () => dir.setTimesAt(NOFOLLOW, "API_TOKEN", when, when), "read-only"],
      ["write", () => token.write(bytes("x"), 0n), "read-only"],
      ["set-size", () => token.setSize(0n), "read-only"],
      ["write stream", () => token.writeViaStream(0n), "read-only"],
      ["append stream", () => token.appendViaStream(), "read-only"],
      ["set-times", () => token.setTimes(when, when), "read-only"],
      ["..", () => dir.openAt(NOFOLLOW, "../hello.txt", {}, READ), "not-permitted"],
      ["absolute", () => dir.openAt(NOFOLLOW, "/API_TOKEN", {}, READ), "not-permitted"],
      ["missing", () => dir.openAt(NOFOLLOW, "NOT_GRANTED", {}, READ), "no-entry"],
      ["below a file", () => dir.openAt(NOFOLLOW, "API_TOKEN/x", {}, READ), "not-directory"],
      ["file as directory", () => dir.openAt(NOFOLLOW, "API_TOKEN", { directory: true }, READ), "not-directory"],
      ["nul", () => dir.openAt(NOFOLLOW, "API\0TOKEN", {}, READ), "invalid"],
      ["readlink", () => dir.readlinkAt("API_TOKEN"), "invalid"],
      ["read a directory", () => dir.read(1n, 0n), "bad-descriptor"],
      ["list a file", () => token.readDirectory(), "not-directory"],
    ] as const) {
      expect(thrown(action), what).toBe(code);
    }
  });
});

describe("revocation", () => {
  it("closes every fd and fails every descriptor and stream from then on", () => {
    filesystem.revoke();
    const baseline = openFds(box);
    ({ filesystem, root } = mount(box.root));
    const file = open("hello.txt", WRITE);
    const sub = open("sub");
    const input = file.readViaStream(0n);
    const output = file.writeViaStream(0n);
    const listing = root.readDirectory();
    expect(openFds(box)).toBe(baseline + 3);
    filesystem.revoke();
    expect(openFds(box)).toBe(baseline);
    expect(filesystem.preopens()).toEqual([]);
    for (const action of [
      () => root.statAt(NOFOLLOW, "hello.txt"),
      () => root.openAt(NOFOLLOW, "hello.txt", {}, READ),
      () => file.read(1n, 0n),
      () => sub.readDirectory(),
      () => listing.readDirectoryEntry(),
    ]) {
      expect(thrown(action)).toBe("not-permitted");
    }
    for (const action of [() => input.read(1n), () => output.write(bytes("x")), () => output.checkWrite()]) {
      const failure = thrown(action) as { tag: string; val: unknown };
      expect(failure.tag).toBe("last-operation-failed");
      expect(filesystemTypes.filesystemErrorCode(failure.val)).toBe("not-permitted");
    }
    // Dropping what a guest still held afterwards is harmless.
    for (const resource of [file, sub, input, output, listing, root]) resource[Symbol.dispose]();
    expect(openFds(box)).toBe(baseline);
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("hello world");
  });

  it("keeps a preopen the guest dropped: get-directories hands it out again", () => {
    root[Symbol.dispose]();
    const [[again]] = filesystem.preopens() as [[Descriptor, string]];
    expect(again).toBe(root);
    expect(readAll(again.openAt(NOFOLLOW, "hello.txt", {}, READ))).toBe("hello world");
  });
});

describe("limits", () => {
  it("counts descriptors and streams against maxOpenFiles, not preopens", () => {
    filesystem.revoke();
    ({ filesystem, root } = mount(box.root, {}, { maxOpenFiles: 3 }));
    const first = open("hello.txt");
    const second = open("sub");
    const stream = first.readViaStream(0n);
    expect(thrown(() => open("hello.txt"))).toBe("insufficient-memory");
    expect(thrown(() => first.readViaStream(0n))).toBe("insufficient-memory");
    expect(thrown(() => root.readDirectory())).toBe("insufficient-memory");
    stream[Symbol.dispose]();
    const third = open("sub/inner.txt");
    expect(readAll(third)).toBe("inner");
    second[Symbol.dispose]();
    second[Symbol.dispose]();
    open("sub");
    expect(thrown(() => open("sub"))).toBe("insufficient-memory");
    // A failed open is not counted.
    third[Symbol.dispose]();
    expect(thrown(() => open("missing"))).toBe("no-entry");
    open("hello.txt");
  });

  it("refuses to set up a preopen whose host directory is missing, naming only the guest path", () => {
    const missing = join(box.box, "no-such-directory");
    const error = thrown(() => new GuestFilesystem({ preopens: [{ guestPath: "/workspace", hostDir: missing, readOnly: false }] })) as Error;
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toContain("/workspace");
    expect(error.message).not.toContain(box.box);
  });
});
