/**
 * Vitest global set-up of the `postgres-s3` project: one private PostgreSQL and one S3
 * implementation (s3rver) for the whole run, started here and stopped at the end. They are
 * provided to that project's tests only (`inject("sharedBackends")`), where `startTestService`
 * gives each service a database and a key prefix of its own (helpers/service.ts).
 */
import type { TestProject } from "vitest/node";
import { startPostgres } from "./postgres.ts";
import { startS3 } from "./s3.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** Set in the postgres-s3 project: where its services keep their metadata and blobs. */
    sharedBackends?: { databaseAdminUrl: string; blobUrl: string; s3Env: Record<string, string> };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgres = await startPostgres();
  const s3 = await startS3().catch(async (error: unknown) => {
    await postgres.stop();
    throw error;
  });
  project.provide("sharedBackends", { databaseAdminUrl: postgres.url, blobUrl: s3.blobUrl(), s3Env: { ...s3.env } });
  return async () => {
    await Promise.allSettled([postgres.stop(), s3.stop()]);
  };
}
