/**
 * What a run stages into its session's workspaces: skills/ holds exactly that run's skills (an
 * earlier run's skills, and files a skill no longer has, are gone), the run's own files stay, and
 * removal never follows a symlink a guest planted. And what the model is told about those files.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunInput, RunService } from "../../gen/skillenv/sessions/v1/runs_pb.js";
import type { SessionService } from "../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { StageRequest } from "../../gen/skillenv/extension/v1/extension_pb.js";
import { ConfinementError, removeConfined } from "../src/environments/service/confined-write.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { TestExtension } from "./helpers/extension.ts";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";
import { eventsUntil, runClient, runEnded, sessionClient } from "./helpers/sessions.ts";
import { bundleOf, publish, skillMd, uploadAsset } from "./helpers/skills.ts";

/** What the service sent to the scripted provider (wire JSON). */
type Sent = { body: { system?: unknown; tools: Array<{ name: string; description: string }> } };

const FILES_LINE = "/workspace/skills/<name>/";

/** Every entry under `directory`, relative, sorted; symlinks are listed, never followed. */
async function tree(directory: string, prefix = ""): Promise<string[]> {
  const entries = await fs.readdir(path.join(directory, prefix), { withFileTypes: true });
  const nested = await Promise.all(
    entries.map(async (entry) => {
      const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
      return entry.isDirectory() ? [relative, ...(await tree(directory, relative))] : [relative];
    }),
  );
  return nested.flat().sort();
}

describe("run staging", () => {
  let provider: ScriptedProvider;
  let extension: TestExtension;
  let service: TestService;
  let root: string;
  let sessions: Client<typeof SessionService>;
  let runs: Client<typeof RunService>;

  beforeAll(async () => {
    provider = await startScriptedProvider();
    extension = await new TestExtension().start();
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-staging-")));
    service = await startTestService({
      SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
      SERVICE_MODEL_MAX_RETRIES: "0",
      SERVICE_ENV_FILESYSTEM_ALLOW: root,
      SERVICE_ENV_WORKSPACE_ROOT: path.join(root, "workspaces"),
      SERVICE_ENV_NETWORK_ALLOW: extension.url,
    });
    sessions = sessionClient(service.url, KEY_A);
    runs = runClient(service.url, KEY_A);
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    await extension?.close();
    await provider?.close();
    if (root) await fs.rm(root, { recursive: true, force: true });
  });

  /** A session with one service environment, "box", with a workspace or without; returns its id and /workspace. */
  async function serviceSession(workspace: boolean): Promise<{ sessionId: string; dir: string }> {
    const grants = workspace ? { grants: { filesystem: { workspace: "write" } } } : {};
    const { session } = await sessions.createSession({ environments: [{ name: "box", kind: { case: "service", value: grants as never } }] });
    return { sessionId: session!.id, dir: path.join(root, "workspaces", "a", session!.id, "box") };
  }

  /** Runs one turn that answers "ok" and waits for its end; returns the provider's request. */
  async function runOnce(sessionId: string, fields: Partial<RunInput>): Promise<Sent> {
    const model = `staging-${Math.random().toString(36).slice(2)}`;
    provider.script(model, [{ text: "ok" }]);
    const input = {
      model: { provider: "anthropic", name: model, maxTokens: 0 },
      message: "go",
      providerKeys: { anthropic: "k" },
      skills: [],
      files: [],
      ...fields,
    };
    const { run } = await runs.createRun({ sessionId, run: input as never });
    const events = await eventsUntil(sessions, sessionId, runEnded(run!.id));
    expect(events.at(-1)?.type, JSON.stringify(events.at(-1)?.data)).toBe("turn.completed");
    const request = provider.requests.findLast((sent) => sent.body.model === model);
    return request as unknown as Sent;
  }

  const skills = (...names: string[]) => ({ skills: names.map((name) => ({ kind: "skill", name })) }) as never as Partial<RunInput>;

  it("replaces skills/ with exactly the current run's skills, and keeps the run's own files", async () => {
    await publish(service, "alpha", bundleOf({ "SKILL.md": skillMd({ description: "Alpha v1." }), "old.py": "print('v1')", "lib/shared.py": "V1" }));
    await publish(service, "beta", bundleOf({ "SKILL.md": skillMd({ description: "Beta." }), "beta.sh": "echo beta" }));
    const data = await uploadAsset(service, new TextEncoder().encode("a,b\n1,2\n"));
    const { sessionId, dir } = await serviceSession(true);

    await runOnce(sessionId, { ...skills("alpha", "beta"), files: [{ path: "data/input.csv", assetSha256: data }] as never });
    expect(await tree(dir)).toEqual([
      "data",
      "data/input.csv",
      "skills",
      "skills/alpha",
      "skills/alpha/SKILL.md",
      "skills/alpha/lib",
      "skills/alpha/lib/shared.py",
      "skills/alpha/old.py",
      "skills/beta",
      "skills/beta/SKILL.md",
      "skills/beta/beta.sh",
    ]);

    // alpha re-published without old.py (SPEC 3 rule 7): the next run referencing it sees v2 only.
    await publish(service, "alpha", bundleOf({ "SKILL.md": skillMd({ description: "Alpha v2." }), "new.py": "print('v2')", "lib/shared.py": "V2" }));
    await runOnce(sessionId, skills("alpha"));
    expect(await tree(dir)).toEqual([
      "data",
      "data/input.csv",
      "skills",
      "skills/alpha",
      "skills/alpha/SKILL.md",
      "skills/alpha/lib",
      "skills/alpha/lib/shared.py",
      "skills/alpha/new.py",
    ]);
    expect(await fs.readFile(path.join(dir, "skills/alpha/lib/shared.py"), "utf8")).toBe("V2");
    expect(await fs.readFile(path.join(dir, "skills/alpha/SKILL.md"), "utf8")).toContain("Alpha v2.");
    expect(await fs.readFile(path.join(dir, "data/input.csv"), "utf8")).toBe("a,b\n1,2\n");

    // A run with no skills leaves no skills/ behind.
    await runOnce(sessionId, {});
    expect(await tree(dir)).toEqual(["data", "data/input.csv"]);
  });

  it("deleting the session also removes what a crash mid-stage left beside the workspace", async () => {
    const { sessionId, dir } = await serviceSession(true);
    const leftover = `${dir}.removing-2f0c1a`;
    await fs.mkdir(path.join(leftover, "skills-of-an-old-run"), { recursive: true });
    await fs.writeFile(path.join(leftover, "skills-of-an-old-run", "SKILL.md"), "old");
    const other = await serviceSession(true);
    await sessions.deleteSession({ sessionId });
    await expect(fs.stat(dir)).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(leftover)).rejects.toThrow(/ENOENT/);
    expect((await fs.stat(other.dir)).isDirectory()).toBe(true);
  });

  it("journals what each stage replaced", async () => {
    const { sessionId } = await serviceSession(true);
    await publish(service, "gamma", bundleOf({ "SKILL.md": skillMd({ description: "Gamma." }) }));
    await runOnce(sessionId, skills("gamma"));
    const events = await eventsUntil(sessions, sessionId, runEnded());
    const sent = events.filter((event) => event.type === "operation.sent" && event.data?.kind === "stage");
    expect(sent).toHaveLength(1);
    expect(sent[0]!.data?.input).toMatchObject({ replace: ["skills"], files: [{ path: "skills/gamma/SKILL.md" }] });
  });

  it("removes a symlink planted as skills/ or inside it, never what it points to", async () => {
    await publish(service, "delta", bundleOf({ "SKILL.md": skillMd({ description: "Delta." }), "tool.py": "pass" }));
    const { sessionId, dir } = await serviceSession(true);
    const target = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-staging-target-"));
    try {
      await fs.mkdir(path.join(target, "sub"));
      await fs.writeFile(path.join(target, "sub", "precious.txt"), "keep me");
      // What a guest with a write grant can do: plant links in /workspace.
      await fs.symlink(target, path.join(dir, "skills"));
      await runOnce(sessionId, skills("delta"));
      expect((await fs.lstat(path.join(dir, "skills"))).isDirectory()).toBe(true);
      expect(await tree(dir)).toEqual(["skills", "skills/delta", "skills/delta/SKILL.md", "skills/delta/tool.py"]);

      await fs.symlink(target, path.join(dir, "skills", "delta", "dir-link"));
      await fs.symlink(path.join(target, "sub", "precious.txt"), path.join(dir, "skills", "file-link"));
      await fs.symlink(path.join(target, "sub"), path.join(dir, "skills", "old-skill"));
      await runOnce(sessionId, skills("delta"));
      expect(await tree(dir)).toEqual(["skills", "skills/delta", "skills/delta/SKILL.md", "skills/delta/tool.py"]);

      expect(await tree(target)).toEqual(["sub", "sub/precious.txt"]);
      expect(await fs.readFile(path.join(target, "sub", "precious.txt"), "utf8")).toBe("keep me");
      // Nothing is left beside the workspace: what was removed went by way of a trash path that is gone too.
      expect(await fs.readdir(path.dirname(dir))).toEqual(["box"]);
    } finally {
      await fs.rm(target, { recursive: true, force: true });
    }
  });

  it("removes only inside the workspace: a directory on the way that is a symlink is refused, a missing one is nothing to remove", async () => {
    const workspace = await fs.mkdtemp(path.join(root, "confined-"));
    const target = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-staging-target-"));
    const trash = `${workspace}.removing-test`;
    try {
      await fs.mkdir(path.join(target, "sub"));
      await fs.writeFile(path.join(target, "sub", "precious.txt"), "keep me");
      await fs.symlink(target, path.join(workspace, "linked"));
      await expect(removeConfined(workspace, "linked/sub", trash)).rejects.toBeInstanceOf(ConfinementError);
      for (const bad of ["../x", "/etc", "a//b", "."]) await expect(removeConfined(workspace, bad, trash)).rejects.toBeInstanceOf(ConfinementError);
      await removeConfined(workspace, "missing/sub", trash);
      await removeConfined(workspace, "missing", trash);
      expect(await tree(target)).toEqual(["sub", "sub/precious.txt"]);
      expect(await fs.readdir(workspace)).toEqual(["linked"]);
    } finally {
      await fs.rm(target, { recursive: true, force: true });
    }
  });

  it('sends the extension replace_directories ["skills"] with the run\'s files', async () => {
    await publish(service, "epsilon", bundleOf({ "SKILL.md": skillMd({ description: "Epsilon." }) }));
    const { session } = await sessions.createSession({ environments: [{ name: "remote", kind: { case: "extension", value: { url: extension.url } } }] });
    const before = extension.calls.length;
    await runOnce(session!.id, skills("epsilon"));
    const stage = extension.calls.slice(before).find((call) => call.method === "stage")!.request as StageRequest;
    expect(stage.replaceDirectories).toEqual(["skills"]);
    expect(stage.files.map((file) => file.path)).toEqual(["skills/epsilon/SKILL.md"]);
  });

  it("tells the model where a skill's files are only when they were staged into a workspace", async () => {
    await publish(service, "zeta", bundleOf({ "SKILL.md": skillMd({ description: "Zeta." }), "notes.md": "notes" }));
    const staged = await runOnce((await serviceSession(true)).sessionId, skills("zeta"));
    expect(JSON.stringify(staged.body.system)).toContain(`Its files are under ${FILES_LINE}.`);
    expect(staged.body.tools.find((tool) => tool.name === "skills")!.description).toContain(`A skill's other files are under ${FILES_LINE}.`);

    // A service environment without a workspace grant stages nothing: no files to point at.
    const { sessionId, dir } = await serviceSession(false);
    const unstaged = await runOnce(sessionId, skills("zeta"));
    expect(JSON.stringify(unstaged.body.system)).toContain("Skills are available through the `skills` tool");
    expect(JSON.stringify(unstaged.body.system)).not.toContain("/workspace");
    expect(unstaged.body.tools.find((tool) => tool.name === "skills")!.description).not.toContain("/workspace");
    await expect(fs.stat(dir)).rejects.toMatchObject({ code: "ENOENT" });
    const events = await eventsUntil(sessions, sessionId, runEnded());
    expect(events.some((event) => event.type === "operation.sent" && event.data?.kind === "stage")).toBe(false);
  });
});
