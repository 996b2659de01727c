import { describe, expect, it } from "vitest";
import { describeContent, MAX_TOOL_IMAGE_CHARS, NameCollision, outputOf, placementName, placementNames } from "@skillenv/client/mcp";
import { toolResultText } from "../../src/models/port.ts";
import { withImages } from "../../src/runs/tool-images.ts";

const MODEL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

describe("MCP placement names", () => {
  it("keeps <environment>__<tool> when it fits the model-facing rule", () => {
    expect(placementName("docs", "search")).toBe("docs__search");
    expect(placementName("ev", "get-sum")).toBe("ev__get-sum");
    expect(placementName("a".repeat(32), "b".repeat(30))).toBe(`${"a".repeat(32)}__${"b".repeat(30)}`);
  });

  it("shortens names that do not fit to exactly 64 characters: a readable head and a hash of the tool's name", () => {
    const long = "github.repos.pull_requests.list_review_comments_for_a_pull_request_v2";
    const name = placementName("docs", long);
    expect(name).toBe("docs__github_repos_pull_requests_list_review_comments_ad4674c0ff");
    expect(name).toHaveLength(64);
    expect(placementName("docs", "files/read")).toBe("docs__files_read_2b733164e1");
    // Characters outside the rule, non-ASCII ones included, never reach the name.
    for (const tool of ["ü".repeat(80), "x.y", "名前", `${"z".repeat(100)}!`]) expect(placementName("e".repeat(32), tool)).toMatch(MODEL_NAME);
  });

  it("is deterministic and tells apart tools whose names differ only where they were cut or replaced", () => {
    const prefix = "p".repeat(70);
    expect(placementName("env", `${prefix}1`)).toBe(placementName("env", `${prefix}1`));
    expect(placementName("env", `${prefix}1`)).not.toBe(placementName("env", `${prefix}2`));
    expect(placementName("env", "a.b")).not.toBe(placementName("env", "a/b"));
    expect(() => placementNames("env", [`${prefix}1`, `${prefix}2`, "a.b", "a/b", "a_b"])).not.toThrow();
  });

  it("refuses a collision it cannot rule out rather than resolving it by order", () => {
    expect(() => placementNames("env", ["echo", "echo"])).toThrow(NameCollision);
    const shortened = placementName("env", "a.b").slice("env__".length);
    expect(() => placementNames("env", ["a.b", shortened])).toThrow(/would both be placed as/);
  });
});

describe("MCP tool results as text", () => {
  it("keeps text, and describes images, audio and resources without their data", () => {
    const text = describeContent([
      { type: "text", text: "first" },
      { type: "image", mimeType: "image/png", data: "AAAA" },
      { type: "audio", mimeType: "audio/wav", data: "AAA=" },
      { type: "resource_link", uri: "file:///a.txt", name: "a.txt", mimeType: "text/plain" },
      { type: "resource", resource: { uri: "file:///b.txt", mimeType: "text/plain", text: "inside b" } },
      { type: "resource", resource: { uri: "file:///c.bin", mimeType: "application/octet-stream", blob: "AAAAAA==" } },
    ]);
    expect(text.split("\n")).toEqual([
      "first",
      "[image: image/png, 3 bytes, not shown]",
      "[audio: audio/wav, 2 bytes, not shown]",
      "[resource link: file:///a.txt (a.txt, text/plain)]",
      "[resource file:///b.txt (text/plain)]",
      "inside b",
      "[resource file:///c.bin (application/octet-stream), 4 bytes, not shown]",
    ]);
  });

  it("gives structuredContent beside the text when the server sends it", () => {
    expect(JSON.parse(outputOf({ content: [{ type: "text", text: "3" }], structuredContent: { sum: 3 } }))).toEqual({
      content: "3",
      structuredContent: { sum: 3 },
    });
    expect(JSON.parse(outputOf({ content: [] }))).toEqual({ content: "" });
  });

  it("carries images of the types models take beside the text, while they fit, and describes the rest", () => {
    const png = { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" };
    const tiff = { type: "image", mimeType: "image/tiff", data: "AAAA" };
    const large = { type: "image", mimeType: "image/jpeg", data: "A".repeat(MAX_TOOL_IMAGE_CHARS) };
    expect(JSON.parse(outputOf({ content: [{ type: "text", text: "look" }, png, tiff, large] }))).toEqual({
      content: "look\n[image: image/png, 8 bytes, attached]\n[image: image/tiff, 3 bytes, not shown]\n[image: image/jpeg, 196608 bytes, not shown]",
      images: [{ mimeType: "image/png", data: "iVBORw0KGgo=" }],
    });
    // Not base64: never passed on as an image.
    expect(JSON.parse(outputOf({ content: [{ ...png, data: "not base64!" }] }))).toEqual({ content: "[image: image/png, 8 bytes, not shown]" });
  });

  it("takes a returned output's images out of the text a model reads, and leaves any other output as it is", () => {
    const image = { mimeType: "image/png", data: "iVBORw0KGgo=" };
    expect(withImages(JSON.stringify({ content: "look", images: [image] }))).toEqual({ output: '{"content":"look"}', images: [image] });
    for (const output of ['"images"', JSON.stringify({ images: [] }), JSON.stringify({ images: [{ ...image, mimeType: "image/tiff" }] }), "not json images"])
      expect(withImages(output)).toEqual({ output, images: undefined });
  });

  it("notes images in the text of a provider that takes none in tool results", () => {
    const result = { type: "tool_result" as const, toolCallId: "c1", output: "{}", isError: false };
    expect(toolResultText(result, "P")).toBe("{}");
    expect(toolResultText({ ...result, images: [{ mimeType: "image/png", data: "AA==" }] }, "P")).toBe(
      "{}\n[1 image of this result not shown: P takes no images in tool results here]",
    );
  });
});
