export { REDACTED, redactText } from "./redact.ts";
