/**
 * Traces are exported only when the standard OpenTelemetry variables configure an exporter
 * (docs/operations.md, "Traces"). The variables mean what the OpenTelemetry specification's
 * "Environment Variable Specification" and "OTLP Exporter Configuration" say, with one departure:
 * the specification's default exporter is `otlp` to localhost, which would make every
 * deployment send spans nowhere useful; here nothing is exported until an operator says where.
 */

type Env = Readonly<Record<string, string | undefined>>;

export interface TracingSettings {
  /** Where spans are POSTed as OTLP/protobuf (an OTLP/HTTP collector's `/v1/traces`). */
  url: string;
  /** Sent with every export (a collector's credentials, often): never logged. */
  headers: Record<string, string>;
  /** Bound on one export request. */
  timeoutMs: number;
  /** `service.name` and the other resource attributes every span carries. */
  resource: Record<string, string>;
  sampler: SamplerSetting;
  batch: BatchSettings;
}

/** OTEL_TRACES_SAMPLER and its argument (a ratio, for the `traceidratio` samplers). */
export interface SamplerSetting {
  name: "always_on" | "always_off" | "traceidratio" | "parentbased_always_on" | "parentbased_always_off" | "parentbased_traceidratio";
  ratio: number;
}

/** The batch span processor's settings, in the SDK's own terms. */
export interface BatchSettings {
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
}

const SAMPLERS: ReadonlyArray<SamplerSetting["name"]> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

/**
 * The tracing settings, or undefined when no exporter is configured. Tracing is on when
 * `OTEL_TRACES_EXPORTER` is `otlp`, or is unset and an OTLP endpoint is
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`); `OTEL_SDK_DISABLED=true`
 * and `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set. Problems are added to
 * `problems`, naming the variable; no message repeats a header's value.
 */
export function readTracingSettings(env: Env, problems: string[]): TracingSettings | undefined {
  const value = (name: string) => {
    const raw = env[name]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  };
  if (value("OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const exporters = value("OTEL_TRACES_EXPORTER")
    ?.split(",")
    .map((name) => name.trim().toLowerCase());
  const tracesEndpoint = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const endpoint = value("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (exporters === undefined ? tracesEndpoint === undefined && endpoint === undefined : exporters.includes("none")) return undefined;
  const unsupported = exporters?.filter((name) => name !== "otlp") ?? [];
  if (unsupported.length > 0) problems.push(`OTEL_TRACES_EXPORTER: ${JSON.stringify(unsupported.join(","))} is not supported: expected otlp or none`);

  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"]) {
    const protocol = value(name);
    if (protocol !== undefined && protocol !== "http/protobuf") problems.push(`${name}: only http/protobuf is supported (OTLP over HTTP)`);
  }
  const url = exportUrl(tracesEndpoint, endpoint, problems);
  const headers = {
    ...keyValues(env, "OTEL_EXPORTER_OTLP_HEADERS", problems, { secret: true }),
    ...keyValues(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", problems, { secret: true }),
  };
  const integer = (name: string, fallback: number) => positiveInt(value(name), name, problems) ?? fallback;
  const resource = keyValues(env, "OTEL_RESOURCE_ATTRIBUTES", problems, { secret: false });
  resource["service.name"] = value("OTEL_SERVICE_NAME") ?? resource["service.name"] ?? "skillenv";
  const settings: TracingSettings = {
    url,
    headers,
    timeoutMs:
      positiveInt(value("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"), "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", problems) ?? integer("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000),
    resource,
    sampler: sampler(value("OTEL_TRACES_SAMPLER"), value("OTEL_TRACES_SAMPLER_ARG"), problems),
    batch: {
      scheduledDelayMillis: integer("OTEL_BSP_SCHEDULE_DELAY", 5000),
      exportTimeoutMillis: integer("OTEL_BSP_EXPORT_TIMEOUT", 30_000),
      maxQueueSize: integer("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
      maxExportBatchSize: integer("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
    },
  };
  if (settings.batch.maxExportBatchSize > settings.batch.maxQueueSize) {
    problems.push("OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_MAX_QUEUE_SIZE: the first must be at most the second");
  }
  return settings;
}

/**
 * The signal's own endpoint is used as it is; the shared one is a base URL that `v1/traces` is
 * appended to; with neither (OTEL_TRACES_EXPORTER=otlp alone), the specification's default.
 */
function exportUrl(tracesEndpoint: string | undefined, endpoint: string | undefined, problems: string[]): string {
  const [name, raw] = tracesEndpoint !== undefined ? ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tracesEndpoint] : ["OTEL_EXPORTER_OTLP_ENDPOINT", endpoint];
  if (raw === undefined) return "http://localhost:4318/v1/traces";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`${name}: expected an http(s) URL, e.g. http://collector:4318`);
    return raw;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") problems.push(`${name}: expected an http or https URL`);
  if (tracesEndpoint !== undefined) return url.toString();
  return `${raw.replace(/\/+$/, "")}/v1/traces`;
}

/**
 * `key=value,key=value`, each key and value percent-encoded (the W3C Baggage form the
 * specification uses for OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES). A secret's
 * problem never quotes the text.
 */
function keyValues(env: Env, name: string, problems: string[], { secret }: { secret: boolean }): Record<string, string> {
  const raw = env[name]?.trim();
  const pairs: Record<string, string> = {};
  if (!raw) return pairs;
  for (const item of raw.split(",")) {
    const eq = item.indexOf("=");
    const key = decode(item.slice(0, Math.max(eq, 0)).trim());
    const text = decode(item.slice(eq + 1).trim());
    if (eq <= 0 || !key || text === undefined) {
      problems.push(`${name}: expected key=value pairs separated by commas, percent-encoded${secret ? "" : `, got ${JSON.stringify(item)}`}`);
      return {};
    }
    pairs[key] = text;
  }
  return pairs;
}

function decode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function positiveInt(raw: string | undefined, name: string, problems: string[]): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[1-9][0-9]*$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    problems.push(`${name}: expected a positive integer (milliseconds, or a count)`);
    return undefined;
  }
  return Number(raw);
}

function sampler(rawName: string | undefined, rawArg: string | undefined, problems: string[]): SamplerSetting {
  const name = (rawName?.toLowerCase() ?? "parentbased_always_on") as SamplerSetting["name"];
  if (!SAMPLERS.includes(name)) {
    problems.push(`OTEL_TRACES_SAMPLER: expected one of ${SAMPLERS.join(", ")}`);
    return { name: "parentbased_always_on", ratio: 1 };
  }
  const ratio = rawArg === undefined ? 1 : Number(rawArg);
  if (name.endsWith("traceidratio") && !(rawArg === undefined || (/^[0-9.]+$/.test(rawArg) && ratio >= 0 && ratio <= 1))) {
    problems.push("OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, e.g. 0.25");
  }
  return { name, ratio };
}
