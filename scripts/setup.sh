#!/usr/bin/env bash
# Brings a fresh Debian 12 machine to what `npm test` and CI need, before anything else runs
# (npm test's pretest, the first step of .ci/run): installs the missing system packages with
# apt-get as root; otherwise (not root, no dpkg) stops at once, naming the command to run.
# Then checks that bubblewrap can make its sandbox here, which installing alone does not ensure.
set -euo pipefail

# The machine's packages: the one list. Add a package on its own line, saying what needs it.
packages=(
  bubblewrap             # the service environment's worker sandboxes; the example shell extension
  chromium               # the web console's tests drive it (server/test/console.test.ts)
  openssl                # the TLS test's self-signed certificate (server/test/tls.test.ts)
  curl                   # the README's and docs/' curl snippets, which npm test runs (server/test/snippets.test.ts)
  protobuf-compiler      # protoc: generates the Python client's code (npm run generate:python)
  protobuf-compiler-grpc # grpc_python_plugin, the same
  python3-grpcio         # the Python client and its tests, on Debian's /usr/bin/python3 (PyPI is
  python3-protobuf       #   out of reach): clients/python/python.test.ts runs them
  python3-yaml
  python3-pytest
  postgresql-15          # the PostgreSQL metadata store's tests start a private server (server/test/helpers/postgres.ts)
  haproxy                # the load balancer in front of two replicas (server/test/load-balancer.test.ts)
  prometheus             # the metrics test scrapes the service with a real Prometheus and checks the exposition with promtool
)

say() { echo "setup: $*" >&2; }

if ! command -v dpkg-query >/dev/null; then
  say "the tests need Debian's packages ${packages[*]}, and this machine has no dpkg."
  say "Run them on Debian 12 (as CI does), after: apt-get install -y ${packages[*]}"
  exit 1
fi

# One dpkg-query for all (it names the packages it knows, and fails for any it does not).
known=" $(dpkg-query -W -f='${Package}=${db:Status-Status} ' "${packages[@]}" 2>/dev/null || true)"
missing=()
for package in "${packages[@]}"; do
  [[ $known == *" $package=installed "* ]] || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages: ${missing[*]}. Install them as root, then run the tests again:"
    say "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# bubblewrap needs root or unprivileged user namespaces; a machine that forbids them would fail
# every sandboxed test minutes from now, so try the namespaces the sandboxes use.
if ! failure=$(bwrap --unshare-all --die-with-parent --ro-bind / / true 2>&1); then
  say "bubblewrap is installed but cannot make a sandbox here: ${failure:-it exited non-zero}"
  say "It needs root or unprivileged user namespaces (docs/operations.md#the-sandbox)."
  exit 1
fi
