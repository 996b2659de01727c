# Sourced (BASH_ENV) by every shell snippet the snippet test runs (testing/snippets/run-file.ts,
# docs/snippets.md). What it changes is what a reader's terminal and eyes do for them:
#
# - a command that fails, an unset variable and an HTTP error status fail the snippet, where a
#   reader would see the error (set -euo pipefail; curl --fail-with-body);
# - npm install and its kind fail: they would change the repository's node_modules and lock file,
#   which the snippets' directory links (such a block is a fragment);
# - `npm start`, `npm run shell-extension` and `npm run scripted-provider` are servers a reader
#   leaves running in a terminal of their own: here they start in the background, replacing the
#   one of the same name the file started before (so `VAR=value npm start` restarts the service
#   with that setting, on the same data directory), and the snippet goes on once they listen.
#
# SNIPPETS_DIR is the run's directory: each server's output is <name>.log there, its process
# group <name>.pid, which run-file.ts stops when the file is done.
set -euo pipefail
# Once: what a snippet starts (a server, a script) runs with no preamble.
unset BASH_ENV

curl() {
  command curl --fail-with-body "$@"
}

npm() {
  case "${1-}" in
    start) snippets_serve service "${SERVICE_LISTEN:-127.0.0.1:8080}" npm "$@" ;;
    run)
      case "${2-}" in
        shell-extension | scripted-provider) snippets_serve "$2" "$(snippets_port_argument "$@")" npm "$@" ;;
        *) command npm "$@" ;;
      esac
      ;;
    install | i | ci | add | uninstall | update | link | publish)
      # The snippets' directory links the repository's node_modules and package files.
      echo "snippets: 'npm $*' would change the repository itself, not a copy: mark the block fragment (docs/snippets.md)" >&2
      return 1
      ;;
    *) command npm "$@" ;;
  esac
}

# The N of a `--port N` or `--port=N` argument.
snippets_port_argument() {
  local previous=""
  for argument in "$@"; do
    case "$argument" in --port=*) echo "${argument#--port=}" && return ;; esac
    if [ "$previous" = --port ]; then echo "$argument" && return; fi
    previous=$argument
  done
  echo "snippets: '$*' names no --port, so the test cannot tell when it listens" >&2
  return 1
}

# snippets_serve NAME ADDRESS COMMAND...: stops the server NAME this file started, starts COMMAND
# in a process group of its own, and returns once ADDRESS (host:port, or a port) accepts connections
# (the service: once it answers /readyz with 200).
snippets_serve() {
  local name=$1 port=${2##*:}
  shift 2
  snippets_stop "$name"
  # setsid, a program: the command is npm itself, not this file's function, in a process group
  # of its own, so that stopping it reaches npm, its shell and the server.
  setsid "$@" >"$SNIPPETS_DIR/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$SNIPPETS_DIR/$name.pid"
  # The service opens its port while it starts and is ready once /readyz says so (docs/operations.md);
  # the other servers are ready once they accept connections.
  local ready=(snippets_accepts "$port")
  [ "$name" = service ] && ready=(command curl -sf -o /dev/null "http://127.0.0.1:$port/readyz")
  until "${ready[@]}" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "snippets: '$*' exited before listening on port $port:" >&2
      cat "$SNIPPETS_DIR/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
}

snippets_accepts() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1")
}

snippets_stop() {
  local pidfile="$SNIPPETS_DIR/$1.pid"
  [ -f "$pidfile" ] || return 0
  local group
  group=$(cat "$pidfile")
  rm -f "$pidfile"
  kill -TERM -- "-$group" 2>/dev/null || return 0
  # The service drains (SIGTERM) and exits; its data directory stays for the next one.
  while kill -0 -- "-$group" 2>/dev/null; do sleep 0.1; done
}
