// Process entry point (npm start). Before the service's modules load, the process takes the
// malloc settings it is measured with, replacing itself when they are missing; then it serves.
// process-memory.ts is imported directly, not through config/index.ts, so that a process about
// to be replaced loads nothing else (about 60 ms of start-up).
import { ensureMallocEnvironment } from "./config/process-memory.ts";

ensureMallocEnvironment();
await import("./serve.ts");
