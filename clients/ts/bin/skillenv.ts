#!/usr/bin/env node
// The skillenv command line. In this repository Node 24 runs it as TypeScript (npx puts the
// project's Node 24 first on PATH); the published package ships it compiled (scripts/build.ts).
import { runCli } from "../src/cli.ts";

process.exitCode = await runCli(process.argv.slice(2), process.env);
