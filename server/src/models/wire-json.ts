import type { ConversationMessage } from "./port.ts";

/**
 * Request bodies whose `messages` (the Responses API's `input`) are written from each
 * conversation message's wire JSON, made once per message. A run sends its session's whole
 * conversation with every model call, so without this every message would be mapped to the wire
 * format and stringified again on every call of every later run (the largest single cost of
 * building a request). A message never changes once it is part of a conversation (port.ts), so
 * what is remembered stays right; it goes when the message does.
 */
export class WireMessages {
  /** Each message's wire form as JSON: the items it adds to `messages`, comma-separated ("" for none). */
  readonly #json = new WeakMap<ConversationMessage, string>();
  readonly #wire: (message: ConversationMessage) => unknown[];
  /** The body's field that holds them. */
  readonly #field: string;

  /**
   * `wire` maps one conversation message to the wire messages it becomes (one, or with OpenAI's
   * tool results, several); `field` names the list in the body.
   */
  constructor(wire: (message: ConversationMessage) => unknown[], field = "messages") {
    this.#wire = wire;
    this.#field = JSON.stringify(field);
  }

  /**
   * `fields` as JSON, with the messages last: the `leading` wire messages (not remembered), then the
   * conversation's; the last message's wire form made by `lastWire` instead when given (and not
   * remembered), for what only the newest message of a request carries (a cache breakpoint).
   */
  body(
    fields: Record<string, unknown>,
    messages: readonly ConversationMessage[],
    leading: readonly unknown[] = [],
    lastWire?: (message: ConversationMessage) => unknown[],
  ): string {
    const items = leading.map((item) => JSON.stringify(item));
    for (const [index, message] of messages.entries()) {
      const json =
        lastWire && index === messages.length - 1
          ? lastWire(message)
              .map((item) => JSON.stringify(item))
              .join(",")
          : this.#itemsOf(message);
      if (json !== "") items.push(json);
    }
    const head = JSON.stringify(fields);
    return `${head.slice(0, -1)}${head === "{}" ? "" : ","}${this.#field}:[${items.join(",")}]}`;
  }

  #itemsOf(message: ConversationMessage): string {
    let json = this.#json.get(message);
    if (json === undefined) {
      json = this.#wire(message)
        .map((item) => JSON.stringify(item))
        .join(",");
      this.#json.set(message, json);
    }
    return json;
  }
}
