import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Level } from "level";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { newId } from "../src/ids/index.ts";
import type { ConversationMessage } from "../src/models/index.ts";
import { RunRecords, type RunRecord } from "../src/runs/records.ts";
import { interruptedConversation } from "../src/runs/turn-log.ts";
import { LevelStore, StorageError, type Store } from "../src/storage/index.ts";

const SESSION = "ses_0000000000000000000000000a";

function finishedRun(id: string): RunRecord {
  return {
    id,
    sessionId: SESSION,
    workspace: "ws",
    status: "completed",
    model: { provider: "anthropic", name: "m", maxTokens: 1, parameters: {} },
    skills: [],
    createdAt: "2026-01-01T00:00:00.000Z",
    finishedAt: "2026-01-01T00:00:01.000Z",
    usage: { inputTokens: 0, outputTokens: 0 },
    rounds: 1,
    toolCalls: 0,
    outputText: "",
    idempotencyHash: "",
  };
}

function said(text: string): ConversationMessage[] {
  return [{ role: "user", content: [{ type: "text", text }] }];
}

const texts = (messages: readonly ConversationMessage[]) => messages.map((message) => (message.content[0] as { text: string }).text);

describe("a session's conversation (kept in memory for its next run)", () => {
  let dir: string;
  let store: Store;
  /** Two views of one database: `records` is the one under test, `cold` has nothing cached. */
  let records: RunRecords;
  let cold: () => RunRecords;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-run-records-"));
    const db = new Level<string, string>(dir);
    await db.open();
    store = new LevelStore(db);
    records = new RunRecords(store);
    cold = () => new RunRecords(store);
  });
  afterEach(async () => {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const finish = (id: string, text: string) => records.finish(finishedRun(id), said(text), (ops) => store.write(ops));

  it("grows with every committed run and is what storage holds", async () => {
    await finish("run_1", "one");
    expect(texts(await records.conversation(SESSION))).toEqual(["one"]);
    await finish("run_2", "two");
    expect(texts(await records.conversation(SESSION))).toEqual(["one", "two"]);
    expect(await cold().conversation(SESSION)).toEqual(await records.conversation(SESSION));
  });

  it("loses a deleted run's messages", async () => {
    await finish("run_1", "one");
    await finish("run_2", "two");
    await records.conversation(SESSION);
    await records.delete(finishedRun("run_1"));
    expect(texts(await records.conversation(SESSION))).toEqual(["two"]);
  });

  it("does not keep a read that a deletion overlapped", async () => {
    await finish("run_1", "one");
    await finish("run_2", "two");
    const reading = records.conversation(SESSION);
    const deleting = records.delete(finishedRun("run_1"));
    await Promise.all([reading, deleting]);
    expect(texts(await records.conversation(SESSION))).toEqual(["two"]);
  });

  it("forgets the conversation when a run's end could not be written", async () => {
    await finish("run_1", "one");
    await records.conversation(SESSION);
    const failed = records.finish(finishedRun("run_2"), said("two"), async (ops) => {
      await store.write(ops);
      throw new StorageError("the batch was written, but its caller was told otherwise");
    });
    await expect(failed).rejects.toBeInstanceOf(StorageError);
    expect(texts(await records.conversation(SESSION))).toEqual(["one", "two"]);
  });
});

describe("a turn's log (what an interrupted run keeps)", () => {
  let dir: string;
  let store: Store;
  let records: RunRecords;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-turn-log-"));
    const db = new Level<string, string>(dir);
    await db.open();
    store = new LevelStore(db);
    records = new RunRecords(store);
  });

  afterEach(async () => {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("reads back what was logged, answers the calls left without results as unknown, and is removed with the run", async () => {
    const run = { ...finishedRun("run_0000000000000000000000000a"), status: "running" as const };
    const log = records.turnLog(run);
    const user: ConversationMessage = { role: "user", content: [{ type: "text", text: "go" }] };
    const reply: ConversationMessage = {
      role: "assistant",
      content: [
        { type: "text", text: "two tools" },
        { type: "tool_call", id: "came-back", name: "t", input: {} },
        { type: "tool_call", id: "in-flight", name: "t", input: {} },
      ],
    };
    await store.write([log.counters({ rounds: 1, toolCalls: 2, usage: { inputTokens: 3, outputTokens: 4 } }), ...log.messagesOf([user])]);
    const submission = { sealedKey: "v1.sealed", message: "go", agentsMd: "", maxRounds: 4, files: [] };
    await store.write([log.submission(submission)]);
    await store.write([log.reply(1, reply, "tool_use"), log.result({ type: "tool_result", toolCallId: "came-back", output: '{"ok":1}', isError: false })]);
    // Logged already: nothing is written twice.
    expect(log.messagesOf([user, reply])).toEqual([]);

    const { logged, clearOps } = await records.readTurnLog(run);
    expect(logged.counters).toEqual({ rounds: 1, toolCalls: 2, usage: { inputTokens: 3, outputTokens: 4 } });
    expect({ stopReason: logged.stopReason, submission: logged.submission }).toEqual({ stopReason: "tool_use", submission });
    const { messages: conversation, unknown } = interruptedConversation(logged);
    expect(unknown.map((call) => call.id)).toEqual(["in-flight"]);
    expect(conversation.slice(0, 2)).toEqual([user, reply]);
    expect(conversation[2]!.content).toEqual([
      { type: "tool_result", toolCallId: "came-back", output: '{"ok":1}', isError: false },
      { type: "tool_result", toolCallId: "in-flight", output: expect.stringContaining('"unknown_outcome"'), isError: true },
    ]);

    // A turn that continues the log (a resumed run) removes the earlier process's rows with its own.
    const continued = records.turnLog(run, logged);
    expect(continued.messagesOf(conversation).map((op) => op.key)).toEqual([expect.stringMatching(/\/m\/000002$/)]);
    const continuedKeys = continued.clearOps().map((op) => op.key);
    expect(continuedKeys).toHaveLength(clearOps.length + 1);
    expect(continuedKeys).toEqual(expect.arrayContaining([...clearOps.map((op) => op.key), expect.stringMatching(/\/m\/000002$/)]));

    await store.write(clearOps);
    expect((await records.readTurnLog(run)).logged).toEqual({
      counters: undefined,
      messages: [],
      results: new Map(),
      stopReason: undefined,
      submission: undefined,
      keys: [],
    });
    // The turn's own removal names the same rows.
    expect(
      log
        .clearOps()
        .map((op) => op.key)
        .sort(),
    ).toEqual(clearOps.map((op) => op.key).sort());
  });
});

describe("a workspace's runs by start time (the workspace status)", () => {
  let dir: string;
  let store: Store;
  let records: RunRecords;
  const HOUR = 3_600_000;
  const now = Date.parse("2026-06-01T12:00:00.000Z");

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-run-index-"));
    const db = new Level<string, string>(dir);
    await db.open();
    store = new LevelStore(db);
    records = new RunRecords(store);
  });
  afterEach(async () => {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** A run of `workspace` started `ago` ms before now, running, then finished with `status` unless that is "running". */
  async function run(workspace: string, ago: number, status: RunRecord["status"]): Promise<RunRecord> {
    const record: RunRecord = { ...finishedRun(newId("run", now - ago)), workspace, status: "running" };
    delete record.finishedAt;
    await store.write(records.startOps(record));
    if (status === "running") return record;
    const finished = { ...record, status, finishedAt: new Date(now).toISOString() };
    await records.finish(finished, [], (ops) => store.write(ops));
    return finished;
  }

  it("counts the runs started in the window by their current status, the workspace's only", async () => {
    await run("ws", 2 * HOUR, "completed");
    await run("ws", HOUR + 1, "failed");
    await run("ws", HOUR - 1, "completed");
    await run("ws", 30 * 60_000, "cancelled");
    await run("ws", 1000, "running");
    await run("ws", 0, "failed");
    await run("ws-other", 1000, "completed");
    await run("w", 1000, "completed");
    expect(await records.startedSince("ws", now - HOUR, 100)).toEqual({ counts: { running: 1, completed: 1, failed: 1, cancelled: 1 }, truncated: false });
    expect(await records.startedSince("ws-other", now - HOUR, 100)).toEqual({
      counts: { running: 0, completed: 1, failed: 0, cancelled: 0 },
      truncated: false,
    });
    expect(await records.startedSince("nobody", now - HOUR, 100)).toEqual({ counts: { running: 0, completed: 0, failed: 0, cancelled: 0 }, truncated: false });
  });

  it("counts at most `limit` runs, the newest, and says it left some out", async () => {
    await run("ws", 3000, "failed");
    await run("ws", 2000, "completed");
    await run("ws", 1000, "running");
    expect(await records.startedSince("ws", now - HOUR, 2)).toEqual({ counts: { running: 1, completed: 1, failed: 0, cancelled: 0 }, truncated: true });
    expect(await records.startedSince("ws", now - HOUR, 3)).toEqual({ counts: { running: 1, completed: 1, failed: 1, cancelled: 0 }, truncated: false });
  });

  it("forgets a deleted run", async () => {
    const deleted = await run("ws", 1000, "completed");
    await run("ws", 2000, "completed");
    await records.delete(deleted);
    expect((await records.startedSince("ws", now - HOUR, 100)).counts.completed).toBe(1);
  });
});
