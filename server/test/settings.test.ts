import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../src/config/index.ts";

describe("settings", () => {
  it("has safe defaults: loopback, empty allow-lists, two workers, 10 billion fuel units a call", () => {
    const settings = loadSettings({});
    expect(settings.listen).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(settings.apiKeys).toBeUndefined();
    expect(settings.env).toMatchObject({
      filesystemAllow: [],
      networkAllow: [],
      secretAllow: [],
      workers: 2,
      preparationFile: undefined,
      compiledMemoryMib: 0,
      fuel: 10_000_000_000,
    });
    expect(settings.sessions.maxJsonDepth).toBe(32);
    expect(settings).toMatchObject({ logMaxLineBytes: 4096, logHostRefusalsPerMin: 10 });
  });

  it("parses every documented form", () => {
    const settings = loadSettings({
      SERVICE_LISTEN: "[::1]:0",
      SERVICE_API_KEYS: "team-a=aaaaaaaaaaaaaaaa1, team-b=bbbbbbbbbbbbbbbb2,team-a=cccccccccccccccc3",
      SERVICE_PUBLIC_URL: "https://skills.example.com/",
      SERVICE_ENV_NETWORK_ALLOW: "https://api.example.com,https://*.example.org,http://127.0.0.1:9000",
      SERVICE_ENV_FILESYSTEM_ALLOW: "/srv/workspaces",
      SERVICE_ENV_SECRET_ALLOW: "OPENAI_API_KEY,GITHUB_TOKEN",
      SERVICE_ENV_WORKERS: "8",
      SERVICE_MAX_TURN_SECS: "60",
      SERVICE_ENV_PREPARATION: "prep.json",
      SERVICE_ENV_COMPILED_MEMORY_MIB: "512",
    });
    expect(settings.listen).toEqual({ host: "::1", port: 0 });
    expect([...(settings.apiKeys ?? [])]).toEqual([
      ["aaaaaaaaaaaaaaaa1", "team-a"],
      ["bbbbbbbbbbbbbbbb2", "team-b"],
      ["cccccccccccccccc3", "team-a"],
    ]);
    expect(settings.publicUrl).toBe("https://skills.example.com");
    expect(settings.env.networkAllow).toHaveLength(3);
    expect(settings.env.workers).toBe(8);
    expect(settings.env.maxTurnSecs).toBe(60);
    expect(settings.env.preparationFile).toMatch(/^\/.*prep\.json$/);
    expect(settings.env.compiledMemoryMib).toBe(512);
    expect(loadSettings({ SERVICE_ENV_COMPILED_MEMORY_MIB: "0" }).env.compiledMemoryMib).toBe(0);
  });

  it("gives each workspace 200 requests a second in bursts of twice that unless set, its refusals held up to a second, 256 at once; 0 turns the limit off", () => {
    const held = { holdMs: 1000, maxHeld: 256 };
    expect(loadSettings({}).workspaceRates).toEqual({ requestsPerSec: 200, burst: 400, ...held });
    expect(loadSettings({ SERVICE_WORKSPACE_REQUESTS_PER_SEC: "50" }).workspaceRates).toEqual({ requestsPerSec: 50, burst: 100, ...held });
    expect(loadSettings({ SERVICE_WORKSPACE_REQUESTS_PER_SEC: "50", SERVICE_WORKSPACE_REQUEST_BURST: "10" }).workspaceRates).toEqual({
      requestsPerSec: 50,
      burst: 10,
      ...held,
    });
    expect(loadSettings({ SERVICE_WORKSPACE_REFUSAL_HOLD_MS: "0", SERVICE_WORKSPACE_MAX_HELD_REFUSALS: "8" }).workspaceRates).toMatchObject({
      holdMs: 0,
      maxHeld: 8,
    });
    expect(() => loadSettings({ SERVICE_WORKSPACE_MAX_HELD_REFUSALS: "0" })).toThrow("SERVICE_WORKSPACE_MAX_HELD_REFUSALS");
    expect(() => loadSettings({ SERVICE_WORKSPACE_REFUSAL_HOLD_MS: "-1" })).toThrow("SERVICE_WORKSPACE_REFUSAL_HOLD_MS");
    expect(loadSettings({ SERVICE_WORKSPACE_REQUESTS_PER_SEC: "0" }).workspaceRates.requestsPerSec).toBe(0);
    expect(() => loadSettings({ SERVICE_WORKSPACE_REQUEST_BURST: "0" })).toThrow("SERVICE_WORKSPACE_REQUEST_BURST");
  });

  it("keeps 64 MiB of idle sessions in memory unless SERVICE_SESSION_CACHE_MIB says otherwise (0: none), and refuses a negative budget", () => {
    expect(loadSettings({}).sessions.sessionCacheBytes).toBe(64 * 1024 * 1024);
    expect(loadSettings({ SERVICE_SESSION_CACHE_MIB: "0" }).sessions.sessionCacheBytes).toBe(0);
    expect(loadSettings({ SERVICE_SESSION_CACHE_MIB: "8" }).sessions.sessionCacheBytes).toBe(8 * 1024 * 1024);
    expect(() => loadSettings({ SERVICE_SESSION_CACHE_MIB: "-1" })).toThrow("SERVICE_SESSION_CACHE_MIB");
    expect(() => loadSettings({ SERVICE_SESSION_CACHE_MIB: "lots" })).toThrow("SERVICE_SESSION_CACHE_MIB");
  });

  it("resumes interrupted runs unless SERVICE_RUN_RESUME=off, and takes nothing but on or off", () => {
    expect(loadSettings({}).sessions.runResume).toBe(true);
    expect(loadSettings({ SERVICE_RUN_RESUME: "on" }).sessions.runResume).toBe(true);
    expect(loadSettings({ SERVICE_RUN_RESUME: "off" }).sessions.runResume).toBe(false);
    expect(() => loadSettings({ SERVICE_RUN_RESUME: "false" })).toThrow("SERVICE_RUN_RESUME: expected on or off");
  });

  it("reads SERVICE_BLOB_URL as an S3 location: bucket, key prefix, endpoint, region, path style", () => {
    expect(loadSettings({}).blobStore).toBeUndefined();
    expect(loadSettings({ SERVICE_BLOB_URL: "s3://skills-prod" }).blobStore).toEqual({
      bucket: "skills-prod",
      prefix: "",
      endpoint: undefined,
      region: undefined,
      forcePathStyle: false,
    });
    expect(loadSettings({ SERVICE_BLOB_URL: "s3://skills/team/a/?endpoint=http://127.0.0.1:9000&region=us-east-1&forcePathStyle=true" }).blobStore).toEqual({
      bucket: "skills",
      prefix: "team/a/",
      endpoint: "http://127.0.0.1:9000",
      region: "us-east-1",
      forcePathStyle: true,
    });
    expect(() => loadSettings({ SERVICE_BLOB_URL: "s3://skills", SERVICE_UPLOAD_URL_TTL_SECS: "604801" })).toThrow(/at most 604800 seconds/);
  });

  it.each([
    ["SERVICE_LISTEN", "8080", "host:port"],
    ["SERVICE_LISTEN", "localhost:70000", "host:port"],
    ["SERVICE_API_KEYS", "no-equals-sign", "workspace=key"],
    ["SERVICE_API_KEYS", "a=short", "16-256 characters"],
    ["SERVICE_API_KEYS", "a=aaaaaaaaaaaaaaaa1,b=aaaaaaaaaaaaaaaa1", "exactly one workspace"],
    ["SERVICE_API_KEYS", "bad/name=aaaaaaaaaaaaaaaa1", "workspace=key"],
    ["SERVICE_ENV_WORKERS", "0", "positive integer"],
    ["SERVICE_ENV_WORKERS", "two", "positive integer"],
    ["SERVICE_MAX_TURN_SECS", "-5", "positive integer"],
    ["SERVICE_ENV_COMPILED_MEMORY_MIB", "lots", "positive integer"],
    ["SERVICE_ENV_NETWORK_ALLOW", "api.example.com", "origins like"],
    ["SERVICE_ENV_NETWORK_ALLOW", "https://api.*.example.com", "origins like"],
    ["SERVICE_ENV_NETWORK_ALLOW", "http://*.example.com", "origins like"],
    ["SERVICE_ENV_NETWORK_ALLOW", "https://api.example.com/v1", "origins like"],
    ["SERVICE_ENV_NETWORK_ALLOW", "https://user@api.example.com", "origins like"],
    ["SERVICE_ENV_NETWORK_ALLOW", "https://*.[::1]", "origins like"],
    ["SERVICE_ENV_FILESYSTEM_ALLOW", "relative/dir", "absolute paths"],
    ["SERVICE_ENV_SECRET_ALLOW", "NOT-A-NAME", "environment variable names"],
    ["SERVICE_PUBLIC_URL", "ftp://x", "http or https"],
    ["SERVICE_LOG_REQUESTS", "yes", "true or false"],
    ["SERVICE_MAX_UPLOAD_BYTES", "1.5", "positive integer"],
    ["SERVICE_JOURNAL_MAX_JSON_DEPTH", "41", "at most 40"],
    ["SERVICE_JOURNAL_MAX_JSON_DEPTH", "0", "positive integer"],
    ["SERVICE_LOG_MAX_LINE_BYTES", "511", "at least 512"],
    ["SERVICE_LOG_HOST_REFUSALS_PER_MIN", "0", "positive integer"],
    ["SERVICE_BLOB_URL", "https://bucket.s3.amazonaws.com", "s3://bucket"],
    ["SERVICE_BLOB_URL", "s3://KEY:SECRET@bucket", "without credentials"],
    ["SERVICE_BLOB_URL", "s3://Bucket_1", "bucket name"],
    ["SERVICE_BLOB_URL", "s3://bucket/a/../b", "key prefix"],
    ["SERVICE_BLOB_URL", "s3://bucket?endpoint=localhost:9000", "http(s) origin"],
    ["SERVICE_BLOB_URL", "s3://bucket?forcePathStyle=yes", "true or false"],
    ["SERVICE_BLOB_URL", "s3://bucket?secretAccessKey=x", "unknown parameter"],
    ["SERVICE_DATABASE_URL", "mysql://db.example.com/skillenv", "postgres:// or postgresql://"],
    ["SERVICE_DATABASE_URL", "db.example.com:5432", "postgres:// or postgresql://"],
  ])("%s=%j is refused, naming the setting and the accepted form", (name, value, form) => {
    expect(() => loadSettings({ [name]: value })).toThrow(SettingsError);
    try {
      loadSettings({ [name]: value });
    } catch (error) {
      expect((error as Error).message).toContain(`${name}: `);
      expect((error as Error).message).toContain(form);
    }
  });

  it("keeps allowed origins in the canonical form grants are compared in, IPv6 literals included", () => {
    const settings = loadSettings({
      SERVICE_ENV_NETWORK_ALLOW: "HTTP://[::1]:8080,https://API.Example.com:443,https://*.Example.org,http://[0:0:0:0:0:0:0:1]:9000",
    });
    expect(settings.env.networkAllow).toEqual(["http://[::1]:8080", "https://api.example.com", "https://*.example.org", "http://[::1]:9000"]);
  });

  it("reports every bad setting at once", () => {
    expect(() => loadSettings({ SERVICE_LISTEN: "x", SERVICE_ENV_WORKERS: "0" })).toThrow(/SERVICE_LISTEN[\s\S]*SERVICE_ENV_WORKERS/);
  });

  it("requires every session to fit a page of a listing", () => {
    expect(() => loadSettings({ SERVICE_SESSION_MAX_BYTES: "8192", SERVICE_LIST_MAX_BYTES: "4096" })).toThrow(
      /SERVICE_SESSION_MAX_BYTES, SERVICE_LIST_MAX_BYTES/,
    );
    expect(loadSettings({ SERVICE_SESSION_MAX_BYTES: "4096", SERVICE_LIST_MAX_BYTES: "4096" }).limits.listMaxBytes).toBe(4096);
  });

  it("takes a PostgreSQL URL for the metadata, and repeats no password when it refuses one", () => {
    expect(loadSettings({}).databaseUrl).toBeUndefined();
    for (const url of ["postgres://skillenv:pw@db.example.com:5432/skillenv", "postgresql://db.example.com/skillenv?sslmode=require"]) {
      expect(loadSettings({ SERVICE_DATABASE_URL: url }).databaseUrl).toBe(url);
    }
    for (const url of ["mysql://skillenv:s3cret-pw@db.example.com/skillenv", "postgres//skillenv:s3cret-pw@db"]) {
      expect(() => loadSettings({ SERVICE_DATABASE_URL: url })).toThrow(SettingsError);
      expect(() => loadSettings({ SERVICE_DATABASE_URL: url })).not.toThrow(/s3cret/);
    }
  });

  it("requires TLS certificate and key together", () => {
    expect(() => loadSettings({ SERVICE_TLS_CERT: "/tmp/cert.pem" })).toThrow(/SERVICE_TLS_CERT, SERVICE_TLS_KEY/);
  });
});

describe("tracing settings (the standard OTEL_* variables)", () => {
  it("are off unless an exporter is configured", () => {
    expect(loadSettings({}).tracing).toBeUndefined();
    expect(loadSettings({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_HEADERS: "a=b" }).tracing).toBeUndefined();
    expect(loadSettings({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).toBeUndefined();
    expect(loadSettings({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }).tracing).toBeUndefined();
  });

  it("read the endpoints as the specification does: the shared one is a base, the signal's own is used as it is", () => {
    expect(loadSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing?.url).toBe("http://collector:4318/v1/traces");
    expect(loadSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/otlp" }).tracing?.url).toBe("http://collector:4318/otlp/v1/traces");
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b.example.com/custom/path" };
    expect(loadSettings(both).tracing?.url).toBe("https://b.example.com/custom/path");
    expect(loadSettings({ OTEL_TRACES_EXPORTER: "otlp" }).tracing?.url).toBe("http://localhost:4318/v1/traces");
  });

  it("take headers, resource, timeout, sampler and batch settings, signal-specific ones first", () => {
    const tracing = loadSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20shared,x-tenant=a",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=Bearer%20traces",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=staging,service.name=from-resource",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    }).tracing;
    expect(tracing).toMatchObject({
      headers: { authorization: "Bearer traces", "x-tenant": "a" },
      timeoutMs: 2000,
      resource: { "deployment.environment.name": "staging", "service.name": "from-resource" },
      sampler: { name: "parentbased_traceidratio", ratio: 0.25 },
      batch: { scheduledDelayMillis: 100, maxQueueSize: 2048, maxExportBatchSize: 512 },
    });
    expect(loadSettings({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SERVICE_NAME: "named" }).tracing?.resource["service.name"]).toBe("named");
    expect(loadSettings({ OTEL_TRACES_EXPORTER: "otlp" }).tracing?.resource["service.name"]).toBe("skillenv");
  });

  it("refuse what the service cannot export, and never repeat a header's value", () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadSettings(env);
        return "";
      } catch (error) {
        expect(error).toBeInstanceOf(SettingsError);
        return (error as Error).message;
      }
    };
    expect(problems({ OTEL_TRACES_EXPORTER: "zipkin" })).toContain("OTEL_TRACES_EXPORTER");
    expect(problems({ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toContain("only http/protobuf");
    expect(problems({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "collector:4318" })).toContain("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    expect(problems({ OTEL_TRACES_EXPORTER: "otlp", OTEL_TRACES_SAMPLER: "sometimes" })).toContain("OTEL_TRACES_SAMPLER");
    const leaky = problems({ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20ok,secret-token-without-equals" });
    expect(leaky).toContain("OTEL_EXPORTER_OTLP_HEADERS");
    expect(leaky).not.toContain("secret-token");
  });
});
