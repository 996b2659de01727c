import { spawn } from "node:child_process";
import * as fs from "node:fs/promises";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";

/** The bucket every s3rver started here has. */
export const S3_BUCKET = "skillenv-test";

/** s3rver accepts any secret for this key id (it does not check SigV4 signatures, see docs/operations.md). */
const S3RVER_CREDENTIALS = { AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER", AWS_REGION: "us-east-1" };

export interface TestS3 {
  /** A SERVICE_BLOB_URL for the bucket, with `prefix` as its key prefix when given. */
  blobUrl(prefix?: string): string;
  /**
   * Credentials and region for the AWS SDK's default chain. The service reads them from
   * process.env, as in production; a test assigns them there (`Object.assign(process.env, s3.env)`)
   * before it starts a service or a store. Test files run in separate processes (vitest's forks pool).
   */
  env: typeof S3RVER_CREDENTIALS;
  stop(): Promise<void>;
}

/**
 * Starts s3rver (an S3 implementation in Node) as a child process on a free loopback port, with
 * a temporary directory and the bucket `S3_BUCKET`; resolves once it prints its listening line.
 * Free of vitest, so a globalSetup can use it too.
 */
export async function startS3(): Promise<TestS3> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-s3rver-"));
  const bin = createRequire(import.meta.url).resolve("s3rver/bin/s3rver.js");
  const child = spawn(process.execPath, [bin, "-d", directory, "-a", "127.0.0.1", "-p", "0", "--silent", "--configure-bucket", S3_BUCKET], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  const endpoint = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on ([0-9.]+):([0-9]+)/.exec(output);
      if (match) resolve(`http://${match[1]}:${match[2]}`);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then(() => reject(new Error(`s3rver exited before listening:\n${output}`)));
  });
  return {
    blobUrl(prefix?: string) {
      const query = new URLSearchParams({ endpoint, region: S3RVER_CREDENTIALS.AWS_REGION, forcePathStyle: "true" });
      return `s3://${S3_BUCKET}${prefix ? `/${prefix}` : ""}?${query}`;
    },
    env: S3RVER_CREDENTIALS,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}
