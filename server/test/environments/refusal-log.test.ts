import { describe, expect, it } from "vitest";
import { RefusalLog } from "../../src/environments/host/refusal-log.ts";

const refusal = (workspace: string, operationId = "op_01jd000000000000000000000a") => ({
  workspace,
  sessionId: "ses_x",
  environment: "laptop",
  operationId,
  reason: "no command with this operation id is in flight on this connection",
});

describe("the log of refused host receipts", () => {
  it("logs a burst per workspace, then as many a minute, and says how many it left out", () => {
    const lines: Array<Record<string, unknown>> = [];
    let now = 0;
    const log = new RefusalLog(
      (entry) => lines.push(entry),
      3,
      () => now,
    );
    for (let i = 0; i < 10; i++) log.refused(refusal("a"));
    log.refused(refusal("b"));
    expect(lines.map((line) => line.workspace)).toEqual(["a", "a", "a", "b"]);
    expect(lines.every((line) => line.suppressed === undefined)).toBe(true);

    now += 20_000; // a third of a minute: one more line for a
    for (let i = 0; i < 5; i++) log.refused(refusal("a"));
    expect(lines.slice(4)).toEqual([expect.objectContaining({ workspace: "a", suppressed: 7 })]);

    now += 60 * 60_000; // an idle hour refills a burst, no more
    for (let i = 0; i < 5; i++) log.refused(refusal("a"));
    expect(lines.slice(5).map((line) => line.suppressed)).toEqual([4, undefined, undefined]);
  });

  it("repeats a host's operation id no longer than the service's own ids", () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = new RefusalLog((entry) => lines.push(entry), 10);
    log.refused(refusal("a", `op_${"z".repeat(100_000)}`));
    log.refused(refusal("a", "op_made_up"));
    expect(lines.map((line) => line.operationId)).toEqual([`op_${"z".repeat(26)}…`, "op_made_up"]);
  });
});
