# Sourced by scripts/run-*.sh: starts `$BIN serve` (vidforge, or the vidforge-conformance build)
# on a free loopback port with a temporary data dir, waits until /healthz answers, and stops it
# (and removes the dir) on exit. Sets WORK, PORT, BASE and SERVER_PID. $1 names the caller in
# error messages; further arguments are passed to `serve`. SERVE_PORT, if set, is the port to
# listen on instead of a free one picked here (for callers that must know it beforehand).
start_vidforge() {
  local who="$1"
  shift
  WORK="$(mktemp -d)"
  SERVER_PID=""
  trap stop_vidforge EXIT
  PORT="${SERVE_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}"
  BASE="http://127.0.0.1:$PORT"
  RUST_LOG="${RUST_LOG:-info}" "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --backend cpu "$@" \
    >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    curl -fsS "$BASE/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "$who: vidforge exited early:" >&2; cat "$WORK/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "$who: vidforge not ready" >&2
  cat "$WORK/server.log" >&2
  exit 1
}

stop_vidforge() {
  if [ -n "${SERVER_PID:-}" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "${WORK:-}"
}
