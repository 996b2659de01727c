// Escapes a guest can try through wasi:filesystem: none may read, write, create or change
// anything outside its preopen. Each test keeps a marker file outside the preopen (helpers:
// makeBox) and checks that no descriptor ever reads it and that nothing outside changes.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { GuestFilesystem, Descriptor } from "../../src/engine/wasi/filesystem/index.ts";
import {
  bytes,
  entries,
  FOLLOW,
  makeBox,
  mount,
  NOFOLLOW,
  openFds,
  OUTSIDE,
  READ,
  readAll,
  text,
  thrown,
  WRITE,
  type Box,
} from "../helpers/guest-filesystem.ts";

let box: Box;
let filesystem: GuestFilesystem;
let root: Descriptor;

beforeEach(() => {
  box = makeBox();
  writeFileSync(join(box.root, "hello.txt"), "hello");
  mkdirSync(join(box.root, "sub"));
  ({ filesystem, root } = mount(box.root));
});

afterEach(() => {
  filesystem.revoke();
  box.remove();
});

/** Everything outside the preopen that a test could change: names, the marker's bytes and times. */
function outside(): string {
  const marker = statSync(box.marker);
  const listing = (dir: string) => readdirSync(dir).sort().join(",");
  return JSON.stringify([
    listing(box.box),
    listing(join(box.box, "a")),
    listing(join(box.box, "a", "b")),
    listing(join(box.box, "a", "b", "c")),
    readFileSync(box.marker, "utf8"),
    marker.mtimeMs,
    marker.nlink,
  ]);
}

/**
 * Runs an attempt that must fail: what it threw must be a WASI code string (never an Error, never
 * text naming a host path). A result that is a descriptor is read, in case it leads outside.
 */
function refused(attempt: () => unknown): string {
  let result: unknown;
  try {
    result = attempt();
  } catch (error) {
    expect(typeof error, String(error)).toBe("string");
    expect(error as string).not.toContain(box.box);
    return error as string;
  }
  const read =
    result && typeof result === "object" && "read" in result ? (thrown(() => readAll(result as Descriptor)) ?? readAll(result as Descriptor)) : result;
  throw new Error(`the attempt succeeded: ${String(read)}`);
}

describe("the stale-descriptor escape", () => {
  it("reads nothing through a descriptor whose directory was replaced by a climbing symlink", () => {
    const before = outside();
    root.createDirectoryAt("d");
    const d = root.openAt(NOFOLLOW, "d", { directory: true }, READ);
    root.removeDirectoryAt("d");
    root.symlinkAt("../../../..", "d");
    expect(refused(() => d.openAt(NOFOLLOW, "marker", {}, READ).read(4096n, 0n))).toBe("no-entry");
    expect(refused(() => d.openAt(FOLLOW, "marker", {}, READ))).toBe("no-entry");
    expect(refused(() => d.openAt(NOFOLLOW, "x", { create: true }, WRITE))).toBe("no-entry");
    expect(refused(() => d.statAt(NOFOLLOW, "marker"))).toBe("no-entry");
    expect(refused(() => d.createDirectoryAt("x"))).toBe("no-entry");
    expect(refused(() => d.symlinkAt("x", "y"))).toBe("no-entry");
    expect(refused(() => d.openAt(NOFOLLOW, "..", {}, READ))).toBe("not-permitted");
    expect(entries(d)).toEqual([]);
    expect(refused(() => root.openAt(NOFOLLOW, "d/marker", {}, READ))).toBe("not-permitted");
    expect(refused(() => root.openAt(FOLLOW, "d", { directory: true }, READ))).toBe("not-permitted");
    expect(outside()).toBe(before);
  });

  it("keeps a descriptor to its own directory when that is renamed away and a symlink planted in its place", () => {
    root.createDirectoryAt("d");
    writeFileSync(join(box.root, "d", "mine.txt"), "mine");
    const d = root.openAt(NOFOLLOW, "d", { directory: true }, READ);
    root.renameAt("d", root, "moved");
    root.symlinkAt("../../../..", "d");
    expect(readAll(d.openAt(NOFOLLOW, "mine.txt", {}, READ))).toBe("mine");
    expect(refused(() => d.openAt(NOFOLLOW, "marker", {}, READ))).toBe("no-entry");
    d.openAt(NOFOLLOW, "made.txt", { create: true }, WRITE).write(bytes("inside"), 0n);
    expect(readFileSync(join(box.root, "moved", "made.txt"), "utf8")).toBe("inside");
    expect(readdirSync(box.box)).not.toContain("made.txt");
  });

  it("lets no descriptor climb out of a directory the host moved out of the preopen", () => {
    root.createDirectoryAt("d");
    const d = root.openAt(NOFOLLOW, "d", { directory: true }, READ);
    mkdirSync(join(box.box, "trash"));
    renameSync(join(box.root, "d"), join(box.box, "trash", "d"));
    const before = outside();
    for (const path of ["..", "../marker", "../../marker", "./../marker"])
      expect(
        refused(() => d.openAt(NOFOLLOW, path, {}, READ)),
        path,
      ).toBe("not-permitted");
    expect(refused(() => d.statAt(FOLLOW, "../.."))).toBe("not-permitted");
    expect(outside()).toBe(before);
  });
});

/** Every path-taking operation, applied to `path` (for two-path operations, on either side). */
function pathOperations(descriptor: Descriptor, path: string): [string, () => unknown][] {
  const when = { tag: "timestamp", val: { seconds: 1n, nanoseconds: 0 } } as const;
  return [
    ["open", () => descriptor.openAt(NOFOLLOW, path, {}, READ)],
    ["open following", () => descriptor.openAt(FOLLOW, path, {}, READ)],
    ["open directory", () => descriptor.openAt(FOLLOW, path, { directory: true }, READ)],
    ["create", () => descriptor.openAt(FOLLOW, path, { create: true }, WRITE)],
    ["truncate", () => descriptor.openAt(FOLLOW, path, { truncate: true }, WRITE)],
    ["stat", () => descriptor.statAt(FOLLOW, path)],
    ["hash", () => descriptor.metadataHashAt(FOLLOW, path)],
    ["set times", () => descriptor.setTimesAt(FOLLOW, path, when, when)],
    ["mkdir", () => descriptor.createDirectoryAt(`${path}/new-dir`)],
    ["rmdir", () => descriptor.removeDirectoryAt(`${path}/a`)],
    ["unlink", () => descriptor.unlinkFileAt(`${path}/marker`)],
    ["symlink", () => descriptor.symlinkAt("anything", `${path}/new-link`)],
    ["readlink", () => descriptor.readlinkAt(`${path}/marker`)],
    ["link from", () => descriptor.linkAt(FOLLOW, path, descriptor, "stolen")],
    ["link to", () => descriptor.linkAt(NOFOLLOW, "hello.txt", descriptor, `${path}/planted`)],
    ["rename from", () => descriptor.renameAt(`${path}/marker`, descriptor, "stolen")],
    ["rename to", () => descriptor.renameAt("hello.txt", descriptor, `${path}/planted`)],
  ];
}

describe("paths that leave the preopen", () => {
  it("refuses '..' above the descriptor and absolute paths in every operation", () => {
    const sub = root.openAt(NOFOLLOW, "sub", { directory: true }, READ);
    const before = outside();
    const baseline = openFds(box);
    for (const [descriptor, path] of [
      [root, ".."],
      [root, "../../../.."],
      [root, "sub/../.."],
      [root, "sub/../../root/../../../.."],
      [sub, ".."],
      [sub, "../.."],
      [root, "/"],
      [root, box.box],
      [root, "/etc"],
    ] as const) {
      for (const [what, attempt] of pathOperations(descriptor, path)) {
        const code = refused(attempt);
        // `rmdir ../a` and the like may also fail on the last name; nothing may pass.
        expect(["not-permitted", "no-entry"], `${what} ${path}`).toContain(code);
      }
    }
    expect(openFds(box)).toBe(baseline);
    expect(outside()).toBe(before);
    expect(readFileSync(join(box.root, "hello.txt"), "utf8")).toBe("hello");
  });

  it("refuses climbing and absolute symlinks on the way and, when followed, at the end", () => {
    symlinkSync("../../../..", join(box.root, "up"));
    symlinkSync(box.box, join(box.root, "absolute"));
    symlinkSync("../../../../marker", join(box.root, "marker-link"));
    symlinkSync(box.marker, join(box.root, "marker-absolute"));
    symlinkSync("../..", join(box.root, "sub", "up-from-sub"));
    symlinkSync("sub/up-from-sub/x", join(box.root, "chain"));
    // The guest may make such links itself: they are only text.
    root.symlinkAt("../../../../marker", "guest-made");
    const before = outside();
    const baseline = openFds(box);
    for (const path of ["up", "absolute", "sub/up-from-sub", "chain"]) {
      for (const [what, attempt] of pathOperations(root, path)) {
        if (what === "open" || what === "link from") continue; // the last name itself, not followed: below
        expect(refused(attempt), `${what} ${path}`).toBe("not-permitted");
      }
    }
    for (const path of ["marker-link", "marker-absolute", "guest-made", "up", "absolute"]) {
      expect(
        refused(() => root.openAt(FOLLOW, path, {}, READ)),
        path,
      ).toBe("not-permitted");
      expect(
        refused(() => root.openAt(FOLLOW, path, { create: true }, WRITE)),
        path,
      ).toBe("not-permitted");
      expect(
        refused(() => root.statAt(FOLLOW, path)),
        path,
      ).toBe("not-permitted");
      expect(
        refused(() => root.linkAt(FOLLOW, path, root, "stolen")),
        path,
      ).toBe("not-permitted");
      // Not followed, the link is only itself: open refuses it (O_NOFOLLOW), stat describes it.
      expect(
        refused(() => root.openAt(NOFOLLOW, path, {}, READ)),
        path,
      ).toBe("loop");
      expect(root.statAt(NOFOLLOW, path).type).toBe("symbolic-link");
    }
    // A hard link to a symlink is one more symlink, as confined as the first.
    root.linkAt(NOFOLLOW, "marker-link", root, "marker-link-2");
    expect(refused(() => root.openAt(FOLLOW, "marker-link-2", {}, READ))).toBe("not-permitted");
    expect(openFds(box)).toBe(baseline);
    expect(outside()).toBe(before);
  });

  it("follows symlinks that stay inside, however they wind", () => {
    symlinkSync("sub/../hello.txt", join(box.root, "winding"));
    symlinkSync("../hello.txt", join(box.root, "sub", "back"));
    symlinkSync("sub/back", join(box.root, "via-sub"));
    expect(readAll(root.openAt(FOLLOW, "winding", {}, READ))).toBe("hello");
    expect(readAll(root.openAt(FOLLOW, "via-sub", {}, READ))).toBe("hello");
    // From `sub` as a root, the same link climbs above it.
    const sub = root.openAt(NOFOLLOW, "sub", { directory: true }, READ);
    expect(refused(() => sub.openAt(FOLLOW, "back", {}, READ))).toBe("not-permitted");
  });

  it("refuses a climbing symlink renamed into a path component after it was made", () => {
    root.createDirectoryAt("a");
    const a = root.openAt(NOFOLLOW, "a", { directory: true }, READ);
    root.symlinkAt("../../../../..", "innocent");
    root.renameAt("innocent", root, "a/b");
    const before = outside();
    expect(refused(() => a.openAt(NOFOLLOW, "b/marker", {}, READ))).toBe("not-permitted");
    expect(refused(() => root.openAt(NOFOLLOW, "a/b/marker", {}, READ))).toBe("not-permitted");
    expect(refused(() => a.openAt(FOLLOW, "b", { directory: true }, READ))).toBe("not-permitted");
    expect(refused(() => a.createDirectoryAt("b/escaped"))).toBe("not-permitted");
    expect(outside()).toBe(before);
  });

  it("refuses hard links to anything outside, and links inside work", () => {
    symlinkSync("../../../../marker", join(box.root, "marker-link"));
    const before = outside();
    expect(refused(() => root.linkAt(FOLLOW, "marker-link", root, "stolen"))).toBe("not-permitted");
    expect(refused(() => root.linkAt(NOFOLLOW, "../../../../marker", root, "stolen"))).toBe("not-permitted");
    root.linkAt(NOFOLLOW, "hello.txt", root, "sub/hard");
    expect(readAll(root.openAt(NOFOLLOW, "sub/hard", {}, READ))).toBe("hello");
    expect(statSync(box.marker).nlink).toBe(1);
    expect(outside()).toBe(before);
  });

  it("holds a bounded stack of directories, and leaks none on the way out", () => {
    const names = (count: number) => Array.from({ length: count }, () => "d").join("/");
    mkdirSync(join(box.root, names(300)), { recursive: true });
    writeFileSync(join(box.root, names(200), "deep.txt"), "deep");
    const baseline = openFds(box);
    expect(refused(() => root.openAt(NOFOLLOW, names(300), { directory: true }, READ))).toBe("name-too-long");
    expect(openFds(box)).toBe(baseline);
    const deep = root.openAt(NOFOLLOW, `${names(200)}/deep.txt`, {}, READ);
    expect(readAll(deep)).toBe("deep");
    deep[Symbol.dispose]();
    expect(openFds(box)).toBe(baseline);
  });
});

describe("fd numbers", () => {
  it("are never used again by a descriptor or stream after their close", () => {
    writeFileSync(join(box.root, "first.txt"), "first");
    const first = root.openAt(NOFOLLOW, "first.txt", {}, READ);
    const stream = first.readViaStream(0n);
    first[Symbol.dispose]();
    stream[Symbol.dispose]();
    // The number is free now; the next open takes it.
    writeFileSync(join(box.root, "second.txt"), "second");
    const second = root.openAt(NOFOLLOW, "second.txt", {}, READ);
    expect(refused(() => first.read(100n, 0n))).toBe("bad-descriptor");
    expect(thrown(() => stream.read(100n))).toMatchObject({ tag: "last-operation-failed" });
    expect(readAll(second)).toBe("second");
  });

  it("of a revoked invocation reach nothing of the next one", () => {
    const old = root.openAt(NOFOLLOW, "hello.txt", {}, READ);
    const oldStream = old.readViaStream(0n);
    filesystem.revoke();
    const next = makeBox("skillenv-wasi-next-");
    try {
      writeFileSync(join(next.root, "theirs.txt"), "another invocation's file");
      const other = mount(next.root);
      const theirs = other.root.openAt(NOFOLLOW, "theirs.txt", {}, READ);
      expect(refused(() => old.read(100n, 0n))).toBe("not-permitted");
      expect(refused(() => root.openAt(NOFOLLOW, "theirs.txt", {}, READ))).toBe("not-permitted");
      const failure = thrown(() => oldStream.read(100n)) as { tag: string };
      expect(failure.tag).toBe("last-operation-failed");
      expect(readAll(theirs)).toBe("another invocation's file");
      other.filesystem.revoke();
    } finally {
      next.remove();
    }
  });
});

/**
 * A separate process swapping `<root>/r` between a real directory and a symlink climbing to the
 * box, as fast as it can, until it is killed. It prints "ready" once it runs.
 */
const SWAPPER = `
const fs = require("node:fs");
const root = process.argv[1];
const r = root + "/r", moved = root + "/r.d";
process.stdout.write("ready\\n");
for (;;) {
  try {
    fs.renameSync(r, moved);
    fs.symlinkSync("../../../..", r);
    fs.unlinkSync(r);
    fs.renameSync(moved, r);
  } catch {
    try { fs.unlinkSync(r); } catch {}
    try { fs.renameSync(moved, r); } catch {}
  }
}
`;

/** Opens tried while the swapper runs, at least, and until both states of `r` were met. */
const MIN_ATTEMPTS = 5000;
const MAX_ATTEMPTS = 200_000;

describe("the rename race", () => {
  it("is never won, over thousands of opens against a process swapping a directory for a climbing symlink", async () => {
    mkdirSync(join(box.root, "r"));
    writeFileSync(join(box.root, "r", "inside.txt"), "inside");
    const before = outside();
    const swapper = spawn(process.execPath, ["-e", SWAPPER, box.root], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = once(swapper, "exit");
    try {
      await once(swapper.stdout, "data");
      const seen = new Map<string, number>();
      const note = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);
      const escaped: string[] = [];
      let attempts = 0;
      const bothStates = () => (seen.get("not-permitted") ?? 0) > 0 && (seen.get("inside") ?? 0) > 0;
      for (; attempts < MAX_ATTEMPTS && (attempts < MIN_ATTEMPTS || !bothStates()); attempts++) {
        // r/marker exists only outside: opening it at all is an escape.
        try {
          const file = root.openAt(NOFOLLOW, "r/marker", {}, READ);
          escaped.push(`read ${text(file.read(4096n, 0n)[0])}`);
          file[Symbol.dispose]();
        } catch (error) {
          note(String(error));
        }
        try {
          root.statAt(FOLLOW, "r/marker");
          escaped.push("stat r/marker");
        } catch (error) {
          note(String(error));
        }
        try {
          root.openAt(NOFOLLOW, "r/x", { create: true }, WRITE)[Symbol.dispose]();
          note("inside");
        } catch (error) {
          note(String(error));
        }
        // Held open while r changes: its listing is r's, never the box's.
        try {
          const r = root.openAt(FOLLOW, "r", { directory: true }, READ);
          const names = entries(r).map((entry) => entry.name);
          if (names.includes("marker") || names.includes("a")) escaped.push(`listed ${names.join(",")}`);
          if (thrown(() => r.openAt(NOFOLLOW, "marker", {}, READ)) === undefined) escaped.push("marker through r");
          r[Symbol.dispose]();
          note("inside");
        } catch (error) {
          note(String(error));
        }
      }
      expect(escaped).toEqual([]);
      expect(attempts).toBeGreaterThanOrEqual(MIN_ATTEMPTS);
      // Both states of r were met: the race was run, not merely the quiet case.
      expect(bothStates(), JSON.stringify([...seen])).toBe(true);
    } finally {
      swapper.kill("SIGKILL");
      await exited;
    }
    expect(outside()).toBe(before);
    expect(readdirSync(box.box)).not.toContain("x");
    expect(readFileSync(box.marker, "utf8")).toBe(OUTSIDE);
  }, 120_000);
});
