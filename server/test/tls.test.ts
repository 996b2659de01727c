import { execFileSync } from "node:child_process";
import * as fs from "node:fs/promises";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { KEY_A, startTestService, type TestService } from "./helpers/service.ts";

let service: TestService;
let ca: Buffer;
beforeAll(async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-tls-"));
  const [cert, key] = [path.join(dir, "cert.pem"), path.join(dir, "key.pem")];
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    { stdio: "ignore" },
  );
  ca = await fs.readFile(cert);
  service = await startTestService({ SERVICE_TLS_CERT: cert, SERVICE_TLS_KEY: key });
});
afterAll(() => service.close());

describe("optional TLS on the same single port", () => {
  it("serves gRPC over HTTP/2 negotiated by ALPN", async () => {
    expect(service.url).toMatch(/^https:\/\//);
    const health = createClient(Health, createGrpcTransport({ baseUrl: service.url, nodeOptions: { ca } }));
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("serves the JSON API over HTTP/1.1, with https upload URLs", async () => {
    const body = JSON.stringify({ sha256: "a".repeat(64), sizeBytes: 1 });
    const answer = await new Promise<{ status: number; json: any }>((resolve, reject) => {
      const request = https.request(
        `${service.url}/assets/presign`,
        { method: "POST", ca, headers: { authorization: `Bearer ${KEY_A}`, "content-type": "application/json" } },
        (response) => {
          let text = "";
          response.on("data", (chunk) => (text += chunk));
          response.on("end", () => resolve({ status: response.statusCode ?? 0, json: JSON.parse(text) }));
        },
      );
      request.on("error", reject);
      request.end(body);
    });
    expect(answer.status).toBe(200);
    expect(answer.json.uploadUrl).toMatch(new RegExp(`^${service.url}/objects/sha256/`));
  });
});
