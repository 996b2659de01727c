import type { Interceptor } from "@connectrpc/connect";

/** Sends the API key as `Authorization: Bearer <key>` on every call. */
export function apiKeyInterceptor(apiKey: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${apiKey}`);
    return next(request);
  };
}
