import { defineConfig } from "vitest/config";

/**
 * Two projects. `default` runs every test on the embedded backends (LevelDB and the data
 * directory's files). `postgres-s3` runs the suites of the features that keep state (skills,
 * assets, artifacts, sessions, runs) again with their services on a private PostgreSQL and an S3
 * implementation, which its global set-up starts for the run (server/test/helpers/backends.global.ts).
 * The storage contracts and the two-replica test start both backends within their own files, so
 * they are in `default` only.
 */

export default defineConfig({
  test: {
    // Budgets for a test and a hook, not assertions: many tests start a server (a second or two
    // alone, ten or more on a 2-core machine with other jobs running), and the last CI run on such
    // a machine lost three tests to the 30 s budget, none to a wrong result.
    testTimeout: 90_000,
    hookTimeout: 120_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "default",
          include: ["server/test/**/*.test.ts", "clients/**/*.test.ts", "examples/*/test/**/*.test.ts", "scripts/test/**/*.test.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "postgres-s3",
          include: [
            "server/test/skills*.test.ts",
            // assets.test.ts is about the embedded upload endpoint, which the S3 deployment does not serve.
            "server/test/assets-s3.test.ts",
            "server/test/artifacts.test.ts",
            "server/test/sessions.test.ts",
            "server/test/runs.test.ts",
            "server/test/runs-staging.test.ts",
            "server/test/runs-approvals.test.ts",
            "server/test/run-snapshots.test.ts",
          ],
          globalSetup: ["server/test/helpers/backends.global.ts"],
        },
      },
    ],
  },
});
