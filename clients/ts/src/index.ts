export { apiKeyInterceptor } from "./auth.ts";
export { sha256Hex, UploadError, type FetchFunction, type UploadResult } from "./assets.ts";
export { createServiceClient, type ServiceClient, type ServiceClientOptions } from "./client.ts";
