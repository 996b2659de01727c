#!/usr/bin/env node
// The skillenv command line. Needs Node 24 (type stripping): inside this project, npm scripts
// and npx put the bundled Node 24 first on PATH.
import { runCli } from "../src/cli.ts";

process.exitCode = await runCli(process.argv.slice(2), process.env);
