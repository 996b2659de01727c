export { capDepth, exceedsDepth, isJsonText, jsonTextDepth } from "./depth.ts";
