// Preloaded (node --import, through NODE_OPTIONS) in every thread of a worker process, the WASI
// shim's I/O thread among them, where guests' outgoing HTTP requests are made: a thread given an
// egress socket (SKILLENV_EGRESS) makes every connection through the pool's egress proxy
// (egress-tunnel.ts). The watchdog thread is started without one: it makes no connection, and is
// spared Node's HTTP and TLS modules (about 5 MiB of each worker process, measured).
if (process.env.SKILLENV_EGRESS) await import("./egress-tunnel.ts");
