import { describe, expect, it } from "vitest";
import { compareSpecificity, matchTemplate, parseTemplate } from "../src/transcoder/path-template.ts";

const literal = (value: string) => ({ kind: "literal", value });
const wildcard = { kind: "wildcard" };
const deep = { kind: "deep-wildcard" };

describe("parseTemplate", () => {
  it.each([
    {
      source: "/v1/messages/{message_id}",
      segments: [literal("v1"), literal("messages"), wildcard],
      variables: [{ fieldPath: ["message_id"], start: 2, end: 3 }],
      verb: undefined,
    },
    {
      source: "/v1/{name=messages/*}",
      segments: [literal("v1"), literal("messages"), wildcard],
      variables: [{ fieldPath: ["name"], start: 1, end: 3 }],
      verb: undefined,
    },
    {
      source: "/v1/{book.name=shelves/*/books/*}",
      segments: [literal("v1"), literal("shelves"), wildcard, literal("books"), wildcard],
      variables: [{ fieldPath: ["book", "name"], start: 1, end: 5 }],
      verb: undefined,
    },
    {
      source: "/v1/{name=operations/**}:cancel",
      segments: [literal("v1"), literal("operations"), deep],
      variables: [{ fieldPath: ["name"], start: 1, end: 3 }],
      verb: "cancel",
    },
    { source: "/v1/*/x/**", segments: [literal("v1"), wildcard, literal("x"), deep], variables: [], verb: undefined },
    { source: "/{path=**}", segments: [deep], variables: [{ fieldPath: ["path"], start: 0, end: 1 }], verb: undefined },
    {
      source: "/v1/users/{user_id}/messages/{message_id=*}",
      segments: [literal("v1"), literal("users"), wildcard, literal("messages"), wildcard],
      variables: [
        { fieldPath: ["user_id"], start: 2, end: 3 },
        { fieldPath: ["message_id"], start: 4, end: 5 },
      ],
      verb: undefined,
    },
  ])("parses $source", ({ source, segments, variables, verb }) => {
    expect(parseTemplate(source)).toEqual({ source, segments, variables, verb });
  });

  it.each([
    ["v1/x", /must start with \//],
    ["/", /bad segment ""/],
    ["/v1//x", /bad segment ""/],
    ["/v1/x/", /bad segment ""/],
    ["/v1/**/x", /\*\* must be the last segment/],
    ["/v1/{a=**}/x", /\*\* must be the last segment/],
    ["/v1/{a={b}}", /nested braces/],
    ["/v1/{a", /unbalanced braces/],
    ["/v1/a}", /unbalanced/],
    ["/v1/{a.}", /bad field path "a\."/],
    ["/v1/{1a}", /bad field path/],
    ["/v1/{a=}", /bad segment ""/],
    ["/v1/{a=b=c}", /bad segment "b=c"/],
    ["/v1/x:", /bad verb ""/],
    ["/v1/a:b/c", /bad verb "b\/c"/],
    ["/v1/a?b", /bad segment/],
  ])("rejects %s", (source, message) => {
    expect(() => parseTemplate(source)).toThrow(message);
  });
});

describe("matchTemplate", () => {
  it.each<[template: string, path: string, expected: Record<string, string> | undefined]>([
    ["/v1/{name=messages/*}", "/v1/messages/123456", { name: "messages/123456" }],
    ["/v1/{name=messages/*}", "/v1/messages", undefined],
    ["/v1/{name=messages/*}", "/v1/messages/1/2", undefined],
    ["/v1/{name=messages/*}", "/v1/messages/", undefined],
    ["/v1/{name=messages/*}", "/v1/letters/1", undefined],
    ["/v1/{name=messages/*}", "v1/messages/1", undefined],
    ["/v1/users/{user_id}/messages/{message_id}", "/v1/users/me/messages/1", { user_id: "me", message_id: "1" }],
    ["/v1/{book.name=shelves/*/books/*}", "/v1/shelves/s/books/b", { "book.name": "shelves/s/books/b" }],
    ["/v1/*/x", "/v1/anything/x", {}],
    ["/v1/{path=**}", "/v1", { path: "" }],
    ["/v1/{path=**}", "/v1/a/b/c", { path: "a/b/c" }],
    ["/v1/{path=**}", "/v2/a", undefined],
    // Single-segment variables: every percent-encoding is decoded, including %2F.
    ["/v1/{id}", "/v1/a%2Fb%20c%3A%7E", { id: "a/b c:~" }],
    ["/v1/{id}", "/v1/caf%C3%A9", { id: "café" }],
    ["/v1/{id}", "/v1/%ZZ", undefined],
    ["/v1/{id}", "/v1/%C3", undefined],
    // Multi-segment variables: decoded except %2F and %2f.
    ["/v1/{path=**}", "/v1/a%2Fb/c%20d%2f%3F", { path: "a%2Fb/c d%2f?" }],
    ["/v1/{name=shelves/*}", "/v1/shelves/a%2Fb", { name: "shelves/a%2Fb" }],
    ["/v1/{path=**}", "/v1/a%252F", { path: "a%2F" }],
    ["/v1/{path=**}", "/v1/%ZZ", undefined],
    // Literals match the raw path.
    ["/v1/a%20b/{id}", "/v1/a%20b/x", { id: "x" }],
    ["/v1/a%20b/{id}", "/v1/a b/x", undefined],
    // Verbs.
    ["/v1/{name=operations/**}:cancel", "/v1/operations/a/b:cancel", { name: "operations/a/b" }],
    ["/v1/{name=operations/**}:cancel", "/v1/operations/a/b", undefined],
    ["/v1/{name=operations/**}:cancel", "/v1/operations/a:undo", undefined],
    ["/v1/{name}:cancel", "/v1/:cancel", undefined],
    ["/v1/{id}", "/v1/x:cancel", { id: "x:cancel" }],
  ])("%s matches %s -> %o", (template, path, expected) => {
    const values = matchTemplate(parseTemplate(template), path);
    expect(values === undefined ? undefined : Object.fromEntries(values)).toEqual(expected);
  });
});

describe("compareSpecificity", () => {
  it("orders more literals first, then fewer ** segments", () => {
    const mostSpecificFirst = ["/v1/messages/latest", "/v1/{name=messages/*}:get", "/v1/{name=messages/*}", "/v1/{a}/{b}", "/v1/{a}/{b=**}", "/{path=**}"];
    const shuffled = [3, 5, 0, 4, 1, 2].map((i) => mostSpecificFirst[i] as string);
    const sorted = shuffled.map(parseTemplate).sort(compareSpecificity);
    // The first two tie (three literals each, a verb counting as one); a stable sort keeps their order.
    expect(sorted.map((template) => template.source)).toEqual([
      "/v1/messages/latest",
      "/v1/{name=messages/*}:get",
      "/v1/{name=messages/*}",
      "/v1/{a}/{b}",
      "/v1/{a}/{b=**}",
      "/{path=**}",
    ]);
  });
});
