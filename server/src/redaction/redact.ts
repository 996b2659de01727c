/** What a secret becomes in text the service keeps. */
export const REDACTED = "[redacted]";

/**
 * `text` with every occurrence of each secret replaced by [redacted], in the two forms a peer
 * echoes it in: as it is, and escaped inside a JSON string (a secret with a quote, a backslash or
 * a control character). Used wherever text written by a peer that holds a secret of ours (a model
 * provider holding its key, an extension holding its credential) is kept, shown or logged.
 *
 * A secret is found only as it is: a peer that encodes it (base64, split, reversed) is not caught.
 * A short secret is replaced wherever it occurs, in words that merely contain it too.
 */
export function redactText(text: string, secrets: readonly string[]): string {
  let redacted = text;
  for (const secret of secrets) {
    if (secret === "") continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) redacted = redacted.replaceAll(escaped, REDACTED);
    redacted = redacted.replaceAll(secret, REDACTED);
  }
  return redacted;
}
