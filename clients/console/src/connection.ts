import { Code, ConnectError } from "@connectrpc/connect";
import { createServiceClient, createWebTransport, serviceErrorCode, type ServiceClient } from "@skillenv/client/web";

/**
 * The API key and the client made with it. The key lives in this tab's sessionStorage (gone when
 * the tab closes, never shared with other tabs) and leaves the page only in the Authorization
 * header of the console's own calls to the service that served it.
 */

const KEY_ITEM = "skillenv.console.apiKey";

export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY_ITEM) ?? undefined;
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM);
}

export function clientFor(apiKey: string): ServiceClient {
  return createServiceClient(createWebTransport({ baseUrl: location.origin, apiKey }));
}

/** Checks the key with one cheap call before keeping it; answers the client, or throws why not. */
export async function signIn(apiKey: string): Promise<ServiceClient> {
  const client = clientFor(apiKey);
  await client.skills.list({ pageSize: 1 });
  sessionStorage.setItem(KEY_ITEM, apiKey);
  return client;
}

/** The key was refused: a new one is needed. */
export function isUnauthenticated(error: unknown): boolean {
  return error instanceof ConnectError && error.code === Code.Unauthenticated;
}

/** A failed call in one line: the service's stable code when it gave one. */
export function describeFailure(error: unknown): string {
  if (error instanceof ConnectError) {
    const code = serviceErrorCode(error) ?? Code[error.code];
    return `${error.rawMessage} (${code})`;
  }
  return error instanceof Error ? error.message : String(error);
}
