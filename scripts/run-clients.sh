#!/usr/bin/env bash
# Drives a freshly built vidforge with official MCP clients (the SDKs and the Inspector; nobody here wrote them):
#   - Python `mcp` 2.x over the fallback tools (no tasks extension): clients/python/
#   - TypeScript `@modelcontextprotocol/client` 2.x + `ext-tasks` 0.2.x on the task path: clients/ts/
#   - Python `mcp` 1.x in a legacy-era session (initialize, Mcp-Session-Id) over the fallback tools,
#     reading the result with resources/read and cancelling a render: clients/python-legacy/
#   - the MCP Inspector CLI in its default (legacy) protocol era: list, render, poll:
#     clients/inspector/
# (The rmcp client scenarios are a cargo test: tests/e2e/rmcp_client.rs.)
# Builds nothing: expects target/release/vidforge (or $VIDFORGE_BIN). Installs the clients from their
# lockfiles, starts `vidforge serve` on a free loopback port with a temp data dir, runs each client
# and exits non-zero if any fails.
# With VIDFORGE_URL set (a running server's base URL, e.g. the cluster gateway
# http://127.0.0.1:8090 of scripts/cluster.sh) it starts no server and drives that one instead;
# VIDFORGE_TOKEN, if set, goes with every request (uploads, MCP, downloads) as a bearer token.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
if [ -z "${VIDFORGE_URL:-}" ]; then
  [ -x "$BIN" ] || { echo "run-clients: $BIN is missing; build it first (make build)" >&2; exit 2; }
fi
command -v npm >/dev/null || { echo "run-clients: npm is required (the Node clients run on a project-local Node 22)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run-clients: python3 (>= 3.10) is required" >&2; exit 2; }

# Client dependencies, from lockfiles, only when missing or stale.
# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
TS="$ROOT/clients/ts"
npm_install "$TS"
# Node 22 from the npm `node` package in the lockfile, whatever the system Node is.
NODE="$TS/node_modules/.bin/node"
# The inspector brings its own Node 22 the same way (legacy_render.sh puts it first on PATH).
INSPECTOR="$ROOT/clients/inspector"
npm_install "$INSPECTOR"
# One venv per Python client folder, from its requirements.txt (exact pins).
PY="$ROOT/clients/python"
VENV="$PY/.venv"
py_venv "$PY"
PYL="$ROOT/clients/python-legacy"
py_venv "$PYL"

AUTH=()
if [ -n "${VIDFORGE_URL:-}" ]; then
  BASE="${VIDFORGE_URL%/}"
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  curl -fsS -o /dev/null --max-time 10 "$BASE/healthz" || { echo "run-clients: $BASE/healthz does not answer" >&2; exit 1; }
  if [ -n "${VIDFORGE_TOKEN:-}" ]; then
    export VIDFORGE_TOKEN # the clients read it too
    AUTH=(-H "Authorization: Bearer $VIDFORGE_TOKEN")
  fi
  echo "run-clients: against $BASE (not started here)"
else
  unset VIDFORGE_TOKEN # our own server has no tokens
  # shellcheck source=lib/serve.sh
  source "$ROOT/scripts/lib/serve.sh"
  start_vidforge run-clients
fi

# Fixtures: a short 320x180 clip with audio and a semi-transparent logo, uploaded over HTTP.
ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=320x180:rate=25:duration=0.6 \
  -f lavfi -i sine=frequency=440:sample_rate=48000:duration=0.6 -c:a aac -b:a 64k \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p -shortest "$WORK/clip.mp4"
ffmpeg -hide_banner -loglevel error -y -f lavfi -i 'color=c=red@0.6:s=96x48,format=rgba' -frames:v 1 "$WORK/logo.png"
upload() { curl -fsS "${AUTH[@]}" -H 'Content-Type: application/octet-stream' --data-binary "@$1" "$BASE/assets?name=$(basename "$1")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uri"])'; }
CLIP="$(upload "$WORK/clip.mp4")"
LOGO="$(upload "$WORK/logo.png")"

failed=()
run() {
  local name="$1"; shift
  local start=$SECONDS
  echo "== $name"
  if "$@"; then echo "== $name: PASS ($((SECONDS - start)) s)"; else echo "== $name: FAIL ($((SECONDS - start)) s)"; failed+=("$name"); fi
}
run "python mcp (fallback tools)" "$VENV/bin/python" "$PY/fallback_render.py" "$BASE/mcp" "$CLIP" "$LOGO"
run "typescript client + ext-tasks (task path)" "$NODE" "$TS/task_render.mjs" "$BASE/mcp" "$CLIP" "$LOGO"
run "python mcp 1.x (legacy session, fallback tools)" "$PYL/.venv/bin/python" "$PYL/legacy_render.py" "$BASE/mcp" "$CLIP" "$LOGO"
run "mcp inspector cli (legacy mode)" bash "$INSPECTOR/legacy_render.sh" "$BASE/mcp" "$CLIP"

if [ ${#failed[@]} -ne 0 ]; then
  if [ -n "${VIDFORGE_URL:-}" ]; then
    echo "run-clients: FAILED: ${failed[*]} (server $BASE: see its own logs)" >&2
    exit 1
  fi
  echo "run-clients: FAILED: ${failed[*]}; server log:" >&2
  tail -n 50 "$WORK/server.log" >&2
  exit 1
fi
echo "run-clients: all MCP clients passed"
