/**
 * The credentials environment definitions carry (an extension's, an MCP server's), kept beside
 * them rather than in them: printing or serialising a definition never shows one. Read for
 * CreateSession only.
 */
const credentials = new WeakMap<object, string>();

export function keepCredential(definition: object, credential: string): void {
  credentials.set(definition, credential);
}

/** The credential a definition carries, for CreateSession only. */
export function credentialOf(definition: object): string | undefined {
  return credentials.get(definition);
}
