import * as fs from "node:fs/promises";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createNodeTransport,
  createServiceClient,
  hostEnv,
  mcpEnv,
  Skill,
  tool,
  type ServiceClient,
  type Session,
  type SessionEvent,
} from "@skillenv/client/node";
import { buildConsole } from "../../clients/console/build.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../testing/scripted-provider/index.ts";
import { startService, type RunningService } from "../src/app.ts";
import { loadSettings } from "../src/config/index.ts";
import { CONSOLE_CSP, loadConsole } from "../src/console/index.ts";
import { startEverything, type EverythingServer } from "./helpers/mcp.ts";
import { KEY_A } from "./helpers/service.ts";

/**
 * The web console, served by the service and driven in a real headless Chromium (Debian's
 * chromium package; CI installs it). Screenshots go to a temporary directory, or to
 * docs/images/ with CONSOLE_SCREENSHOTS=docs/images (`npm run screenshots`), so that a test run
 * does not rewrite committed files.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const CHROMIUM = "/usr/bin/chromium";
/** The flags this machine kind needs: root has no sandbox, and the network outside loopback is closed. */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const MODEL = "console-model";
const QUESTION = "Which version should the release notes cover?";
const ANSWER = "2.4.0";
const FINAL_TEXT = "The release notes for 2.4.0 are ready: CSV export, environment variables in config files, and Node 20 as the minimum.";

let dataDir: string;
let consoleDir: string;
let screenshots: string;
let provider: ScriptedProvider;
let service: RunningService;
let client: ServiceClient;
/** A real MCP server (@modelcontextprotocol/server-everything) whose tools a session mounts. */
let everything: EverythingServer;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-console-"));
  consoleDir = path.join(dataDir, "console");
  screenshots = process.env.CONSOLE_SCREENSHOTS ? path.resolve(ROOT, process.env.CONSOLE_SCREENSHOTS) : path.join(dataDir, "screenshots");
  await fs.mkdir(screenshots, { recursive: true });
  await buildConsole(consoleDir);
  provider = await startScriptedProvider();
  everything = await startEverything();
  const settings = loadSettings({
    SERVICE_LISTEN: "127.0.0.1:0",
    SERVICE_DATA_DIR: path.join(dataDir, "data"),
    SERVICE_API_KEYS: `a=${KEY_A}`,
    SERVICE_SHUTDOWN_GRACE_SECS: "2",
    SERVICE_ANTHROPIC_BASE_URL: provider.anthropicBaseUrl,
    SERVICE_MCP_ALLOW: everything.origin,
    // A machine where bubblewrap cannot run (a nested container) says so in the tests' environment: the pool runs without it.
    ...(process.env.SERVICE_ENV_SANDBOX ? { SERVICE_ENV_SANDBOX: process.env.SERVICE_ENV_SANDBOX } : {}),
  });
  service = await startService(settings, { log: () => undefined, consoleDir });
  client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: KEY_A }));
});

afterAll(async () => {
  await service?.close();
  await provider?.close();
  await everything?.kill();
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** A request exactly as written, dot segments and escapes included (fetch would normalise the path first). */
function rawGet(
  pathAndQuery: string,
  headers: http.OutgoingHttpHeaders = {},
  method = "GET",
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(service.url);
  return new Promise((resolve, reject) => {
    const request = http.request({ hostname, port, path: pathAndQuery, method, headers }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    request.on("error", reject);
    request.end();
  });
}

describe("the console's static files", () => {
  it("redirects / and /console to /console/, which is the page", async () => {
    expect(await rawGet("/")).toMatchObject({ status: 302, headers: { location: "/console/" } });
    expect(await rawGet("/console")).toMatchObject({ status: 308, headers: { location: "/console/" } });
    const page = await rawGet("/console/");
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.body).toContain('<div id="app">');
  });

  it("serves every file with its content type, the CSP and a cache policy: hashed assets for good, the page revalidated", async () => {
    const page = await rawGet("/console/");
    const [script] = /assets\/console-\w+\.js/.exec(page.body) ?? [];
    const [style] = /assets\/console-\w+\.css/.exec(page.body) ?? [];
    const expected: Array<[string, string, string]> = [
      ["/console/", "text/html; charset=utf-8", "no-cache"],
      [`/console/${script}`, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"],
      [`/console/${style}`, "text/css; charset=utf-8", "public, max-age=31536000, immutable"],
      [`/console/${script}.map`, "application/json", "public, max-age=31536000, immutable"],
      ["/console/favicon.svg", "image/svg+xml", "no-cache"],
    ];
    for (const [route, contentType, cacheControl] of expected) {
      const { status, headers } = await rawGet(route);
      expect({ route, status, type: headers["content-type"], cache: headers["cache-control"] }).toEqual({
        route,
        status: 200,
        type: contentType,
        cache: cacheControl,
      });
      expect(headers["content-security-policy"]).toBe(CONSOLE_CSP);
      expect(headers["x-content-type-options"]).toBe("nosniff");
    }
    expect(CONSOLE_CSP).toContain("connect-src 'self'");
    expect(CONSOLE_CSP).toContain("default-src 'none'");
  });

  it("answers 304 to a browser whose copy is current, and a HEAD with the length of the GET and no body", async () => {
    const first = await rawGet("/console/");
    expect(await rawGet("/console/", { "if-none-match": first.headers.etag })).toMatchObject({ status: 304, body: "" });
    const head = await rawGet("/console/", {}, "HEAD");
    expect(head).toMatchObject({ status: 200, body: "", headers: { "content-length": String(Buffer.byteLength(first.body)) } });
  });

  it("lists no directory and serves nothing outside the console's files, however the path is spelled", async () => {
    const packageJson = await fs.readFile(path.join(ROOT, "package.json"), "utf8");
    const attempts = [
      "/console/assets/",
      "/console/assets",
      "/console/../package.json",
      "/console/%2e%2e/package.json",
      "/console/..%2fpackage.json",
      "/console/%2e%2e%2f%2e%2e%2fpackage.json",
      "/console/assets/..%2f..%2f..%2f..%2fpackage.json",
      "/console/..%5c..%5cpackage.json",
      "/console//etc/passwd",
      "/console/index.html%00.js",
      "/console/%2fetc%2fpasswd",
    ];
    for (const attempt of attempts) {
      const { status, body } = await rawGet(attempt);
      expect({ attempt, status }).toEqual({ attempt, status: 404 });
      expect(body).not.toContain(packageJson.slice(0, 40));
      expect(body).not.toContain("root:");
    }
  });

  it("serves the page to GET and HEAD only", async () => {
    expect((await rawGet("/console/", { "content-length": "0" }, "POST")).status).toBe(404);
  });

  it("says how to build the console when it is not built", async () => {
    const site = await loadConsole(path.join(dataDir, "no-console-here"));
    expect(site.answer("/console/", {})).toMatchObject({ status: 503 });
    expect(new TextDecoder().decode(site.answer("/console/", {})!.body)).toContain("npm run build:console");
    expect(site.answer("/skills", {})).toBeUndefined();
  });
});

describe("the console in Chromium", () => {
  let browser: Browser;
  let page: Page;
  /** Every request the page made, and whether it carried the key. */
  const requests: Array<{ url: string; method: string; authorized: boolean }> = [];
  const pageErrors: string[] = [];
  let session: Session;

  beforeAll(async () => {
    await client.skills.upload(Skill.fromDir(path.join(ROOT, "examples/skills/release-notes")));
    await client.skills.upload(
      Skill.fromContent(
        "---\nname: weekly-status\ndescription: Writes the weekly status report from the week's merged changes and open issues.\n---\n# Weekly status\n",
      ),
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 }, locale: "en-US", timezoneId: "UTC" });
    page.on("request", (request) => requests.push({ url: request.url(), method: request.method(), authorized: request.headers().authorization !== undefined }));
    // Script errors, and anything the CSP refused (Chromium reports that on the console).
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (message.text().includes("Content Security Policy")) pageErrors.push(message.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
  });

  it("opens at / on the sign-in card, refuses a wrong key, signs in and keeps the key in sessionStorage only", async () => {
    await page.goto(`${service.url}/`);
    expect(new URL(page.url()).pathname).toBe("/console/");
    await page.getByLabel("API key").waitFor();
    await page.screenshot({ path: path.join(screenshots, "console-sign-in.png") });

    await page.getByLabel("API key").fill("not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "The service does not accept this key." }).waitFor();

    await page.getByLabel("API key").fill(KEY_A);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "release-notes" }).waitFor();
    expect(await page.evaluate(() => ({ session: Object.values(sessionStorage), local: Object.values(localStorage), cookie: document.cookie }))).toEqual({
      session: [KEY_A],
      local: [],
      cookie: "",
    });
  });

  it("lists the workspace's skills and shows one", async () => {
    await page.locator("tr", { has: page.getByRole("link", { name: "weekly-status" }), hasText: "Writes the weekly status report" }).waitFor();
    await page.screenshot({ path: path.join(screenshots, "console-skills.png") });

    const skill = await client.skills.get("release-notes");
    await page.getByRole("link", { name: "release-notes" }).click();
    const facts = page.locator(".facts", { hasText: skill.contentHash });
    await facts.waitFor();
    expect(await facts.textContent()).toContain("2 files");
    expect(await facts.textContent()).toContain(skill.description);
  });

  it("shows a skill's history and what changed between two versions: files added, removed and changed, and a diff of SKILL.md", async () => {
    const md = (description: string, step: string) =>
      `---\nname: history-demo\ndescription: ${description}\n---\n# Steps\n1. Read the input.\n2. ${step}\n3. Reply.\n`;
    await client.skills.upload(
      Skill.fromFiles({ files: { "SKILL.md": md("First cut.", "Summarise it."), "old.txt": "old", "same.txt": "same", "edit.txt": "abc" } }),
    );
    await client.skills.upload(
      Skill.fromFiles({ files: { "SKILL.md": md("Second cut.", "Summarise it in French."), "new.txt": "new", "same.txt": "same", "edit.txt": "xyz" } }),
    );

    await page.getByRole("link", { name: "← All skills" }).click();
    await page.getByRole("link", { name: "history-demo" }).click();
    const changes = page.getByRole("region", { name: "Changes from version 1 to version 2" });
    await changes.waitFor();
    const history = page.locator(".panel", { has: page.getByRole("heading", { name: "History" }) });
    expect(await history.locator("tbody tr").allTextContents()).toEqual([
      expect.stringMatching(/^version 2 current.*Second cut\./),
      expect.stringMatching(/^version 1 .*First cut\./),
    ]);
    expect(await changes.locator(".file-changes li").allTextContents()).toEqual([
      expect.stringMatching(/^added new\.txt /),
      expect.stringMatching(/^removed old\.txt /),
      expect.stringMatching(/^changed SKILL\.md /),
      expect.stringMatching(/^changed edit\.txt /),
    ]);
    const diff = changes.getByLabel("SKILL.md diff");
    expect(await diff.locator(".diff-removed").allTextContents()).toEqual(["- description: First cut.\n", "- 2. Summarise it.\n"]);
    expect(await diff.locator(".diff-added").allTextContents()).toEqual(["+ description: Second cut.\n", "+ 2. Summarise it in French.\n"]);
    expect(await diff.locator(".diff-same").count()).toBe(6);
    await page.screenshot({ path: path.join(screenshots, "console-skill-history.png"), fullPage: true });

    // A rollback is one more version; comparing it with version 1 shows no change at all.
    await client.skills.rollback("history-demo", 1);
    await page.reload();
    await page.getByRole("region", { name: "Changes from version 2 to version 3" }).waitFor();
    await page.getByLabel("Compare from").selectOption("1");
    await page.getByRole("button", { name: "Compare" }).click();
    const same = page.getByRole("region", { name: "Changes from version 1 to version 3" });
    await same.waitFor();
    expect(await same.textContent()).toContain("No file changed.");
    expect(await same.textContent()).toContain("SKILL.md did not change.");
    expect(await history.locator("tbody tr").first().textContent()).toContain("restored from version 1");
  });

  it("starts a session served by the tab, whose host tool the service calls: the result is the page's and is in the journal", async () => {
    await page.getByRole("link", { name: "Host" }).click();
    await page.getByRole("button", { name: "Start a session served by this tab" }).click();
    await page.waitForURL(/#\/sessions\/ses_/);
    const id = decodeURIComponent(new URL(page.url()).hash.split("/")[2]!);
    await page.locator('tr[data-environment="browser"] .badge-connected').waitFor();
    session = await client.sessions.get(id);

    const receipt = await session.callTool("page_title", {});
    expect(receipt).toMatchObject({ outcome: "returned", output: { title: `Session ${id} · skillenv console` } });
    expect(await page.title()).toBe(`Session ${id} · skillenv console`);
    const journaled = await eventsUntil(session, (event) => event.type === "operation.receipt" && event.data.operationId === receipt.operationId);
    expect(journaled.data).toMatchObject({
      environment: "browser",
      kind: "execute",
      receipt: { returned: { output: { title: `Session ${id} · skillenv console` } } },
    });
    // The call appears in the live transcript too.
    await page.locator(".entry-tool", { hasText: "page_title" }).locator(".badge-returned").waitFor();
  });

  it("serves a run's tool calls, asks the person through ask_user, and shows the run's transcript live", async () => {
    provider.script(MODEL, [
      {
        text: "Let me check the date and ask you.",
        toolCalls: [
          { id: "call_time", name: "browser_time", input: {} },
          { id: "call_ask", name: "ask_user", input: { question: QUESTION } },
        ],
      },
      { text: FINAL_TEXT, chunkChars: 12 },
    ]);
    const run = await session.run({
      message: "Draft the release notes for acme-cli.",
      model: { provider: "anthropic", name: MODEL },
      providerKeys: { anthropic: "scripted" },
      skills: ["release-notes"],
    });

    const question = page.locator(".question", { hasText: QUESTION });
    await question.waitFor();
    await page.locator(".entry-tool", { hasText: "ask_user" }).waitFor();
    await page.getByRole("link", { name: "Host" }).click();
    await page.locator("table.activity", { hasText: "ask_user" }).waitFor();
    await page.screenshot({ path: path.join(screenshots, "console-host.png") });

    await page.goBack();
    await page.locator(".entry-tool", { hasText: "ask_user" }).waitFor();
    await question.getByLabel("Your answer").fill(ANSWER);
    await question.getByRole("button", { name: "Answer" }).click();
    const end = page.locator(".entry-end", { hasText: "Completed" });
    await end.waitFor();
    await page.locator(".run .badge-completed").waitFor();
    await page.screenshot({ path: path.join(screenshots, "console-session.png"), fullPage: true });

    const result = await run.result();
    expect(result).toMatchObject({ status: "completed", outputText: FINAL_TEXT, toolCalls: 2 });
    const asked = await eventsUntil(session, (event) => event.type === "tool.result" && event.data.name === "ask_user");
    expect(asked.data).toMatchObject({ outcome: "returned", output: { answer: ANSWER } });

    const transcript = (await page.locator(".transcript").textContent()) ?? "";
    for (const text of [
      "Draft the release notes for acme-cli.",
      "Let me check the date and ask you.",
      "browser_time",
      QUESTION,
      `"answer": "${ANSWER}"`,
      FINAL_TEXT,
      "Completed (end_turn)",
    ]) {
      expect(transcript).toContain(text);
    }
    expect(await page.locator(".run").textContent()).toContain(FINAL_TEXT);
  });

  it("shows a run's pending approval with its input in the live transcript, approves one and denies another with a reason", async () => {
    // The `pay` tool is this test process's: it counts what reaches it.
    const paid: unknown[] = [];
    const wallet = hostEnv({ name: "wallet", tools: { pay: (input: unknown) => (paid.push(input), { paid: true }) } });
    const approvals = await client.sessions.create({ environments: [wallet], tools: [tool({ name: "pay", environment: wallet, approval: "always" })] });
    provider.script("console-approval-model", [
      {
        toolCalls: [
          { id: "small", name: "pay", input: { amount: 5, to: "cafe" } },
          { id: "large", name: "pay", input: { amount: 5000, to: "casino" } },
        ],
      },
      { text: "Paid the café; the other payment was refused." },
    ]);
    await page.goto(`${service.url}/console/#/sessions/${approvals.id}`);
    const run = await approvals.run({
      message: "Pay both.",
      model: { provider: "anthropic", name: "console-approval-model" },
      providerKeys: { anthropic: "scripted" },
    });

    const small = page.locator(".entry-tool", { hasText: "cafe" });
    const large = page.locator(".entry-tool", { hasText: "casino" });
    await small.locator('[data-approval="pending"]').waitFor();
    await large.locator('[data-approval="pending"]').waitFor();
    expect(await small.locator("pre.input").textContent()).toContain('"amount": 5');
    await page.screenshot({ path: path.join(screenshots, "console-approval.png"), fullPage: true });
    // Nothing was sent while the page showed them waiting.
    expect(paid).toEqual([]);

    await small.getByRole("button", { name: "Approve" }).click();
    await small.locator('[data-approval="approved"]', { hasText: "by console (workspace a)" }).waitFor();
    await large.getByLabel("Reason for denying").fill("not at a casino");
    await large.getByRole("button", { name: "Deny" }).click();
    await large.locator('[data-approval="denied"]', { hasText: "not at a casino" }).waitFor();
    await page.locator(".entry-end", { hasText: "Completed" }).waitFor();

    expect((await run.result()).status).toBe("completed");
    expect(paid).toEqual([{ amount: 5, to: "cafe" }]);
    expect((await run.approvals()).map((approval) => [approval.callId, approval.status, approval.decidedBy?.label])).toEqual([
      ["small", "approved", "console"],
      ["large", "denied", "console"],
    ]);
    await approvals.delete();
  });

  it("marks a host environment another host serves, and serves it from the tab on demand", async () => {
    const laptop = hostEnv({ name: "laptop", tools: {} });
    const elsewhere = await client.sessions.create({ environments: [laptop] });
    await page.goto(`${service.url}/console/#/sessions/${elsewhere.id}`);
    const row = page.locator('tr[data-environment="laptop"]');
    await row.locator("[data-host-elsewhere]").waitFor();

    await elsewhere.hosts.get("laptop")!.stop();
    await row.getByRole("button", { name: "Serve from this tab" }).click();
    await row.locator(".badge-connected").waitFor();
    expect(await row.locator("[data-host-elsewhere]").count()).toBe(0);
    await elsewhere.delete();
  });

  it("shows an MCP server's tools like any other session's, and calls one through the session", async () => {
    const mounted = await client.sessions.create({ environments: [mcpEnv({ name: "everything", url: everything.url })] });
    await page.goto(`${service.url}/console/#/sessions/${encodeURIComponent(mounted.id)}`);
    await page.locator('tr[data-environment="everything"]', { hasText: "mcp" }).waitFor();
    for (const name of ["everything__echo", "everything__get-sum"])
      await page
        .locator("tr", { has: page.locator("code", { hasText: name }) })
        .first()
        .waitFor();
    await page.getByLabel("Tool").selectOption("everything__echo");
    await page.getByLabel("Input (JSON)").fill(JSON.stringify({ message: "from the console" }));
    await page.getByRole("button", { name: "Call tool" }).click();
    await page.locator(".call-result .badge-returned").waitFor();
    expect(await page.locator(".call-result pre.output").textContent()).toContain("from the console");
    // What the page shows is the journaled receipt of the operation it names.
    const operationId = await page.locator(".call-result code").first().textContent();
    const receipt = await eventsUntil(mounted, (event) => event.type === "operation.receipt" && event.data.operationId === operationId);
    expect(receipt.data).toMatchObject({ environment: "everything", receipt: { returned: {} } });
    expect(JSON.stringify(receipt.data)).toContain("from the console");
  });

  it("shows the workspace's status from GetWorkspaceStatus, and refreshes it", async () => {
    const shown = async () =>
      Object.fromEntries(
        await page.locator("[data-count]").evaluateAll((cells) => cells.map((cell) => [cell.getAttribute("data-count"), Number(cell.textContent)])),
      ) as Record<string, number>;
    const expected = (status: Awaited<ReturnType<typeof client.status.getWorkspaceStatus>>) => {
      const counts: Record<string, number> = {};
      for (const lifecycle of ["active", "ending", "ended", "deleting"] as const) counts[`sessions.${lifecycle}`] = status.sessions![lifecycle];
      for (const state of ["running", "completed", "failed", "cancelled"] as const) counts[`runs.${state}`] = status.runsLastHour![state];
      if (status.pool?.available) {
        for (const kind of ["tools", "agentLoops"] as const) {
          for (const field of ["busy", "total", "waiting", "workspaceBusy", "workspaceWaiting"] as const)
            counts[`pool.${kind}.${field}`] = status.pool[kind]![field];
        }
      }
      return counts;
    };
    await page.getByRole("link", { name: "Status" }).click();
    await page.locator('[data-count="runs.completed"]').waitFor();
    const before = await client.status.getWorkspaceStatus({});
    // The earlier tests' runs completed in this workspace within the hour, and their sessions are held.
    expect(before.runsLastHour!.completed).toBeGreaterThan(0);
    expect(before.sessions!.active).toBeGreaterThan(0);
    expect(await shown()).toEqual(expected(before));
    expect(Object.keys(await shown())).toHaveLength(before.pool!.available ? 18 : 8);
    await page.screenshot({ path: path.join(screenshots, "console-status.png") });

    // A new session: the page shows it at its next refresh, without being reloaded.
    const added = await client.sessions.create({ environments: [] });
    await page.locator('[data-count="sessions.active"]', { hasText: String(before.sessions!.active + 1) }).waitFor();
    expect(await shown()).toEqual(expected(await client.status.getWorkspaceStatus({})));
    await added.delete();
  });

  it("signs out, forgetting the key, having made no request but to the service and sent the key only to its API", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API key").waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

    const origin = new URL(service.url).origin;
    expect(requests.filter((request) => new URL(request.url).origin !== origin)).toEqual([]);
    const keyed = requests.filter((request) => request.authorized);
    expect(keyed.length).toBeGreaterThan(0);
    expect(keyed.filter((request) => request.method !== "POST" || !new URL(request.url).pathname.startsWith("/skillenv."))).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});

/** The first event of the session's journal that `matches`, replayed and then waited for. */
async function eventsUntil(session: Session, matches: (event: SessionEvent) => boolean): Promise<SessionEvent> {
  const stop = new AbortController();
  try {
    for await (const event of session.events({ signal: stop.signal })) if (matches(event)) return event;
  } finally {
    stop.abort();
  }
  throw new Error("the session's events ended without the event");
}
