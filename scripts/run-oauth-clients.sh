#!/usr/bin/env bash
# An official MCP client's own OAuth support against vidforge as an OAuth 2.1 resource server
# (MCP 2026-07-28 authorization), end to end on loopback with a real authorization server:
#   - the authorization server: tests/oauth/authorization-server.mjs (npm oidc-provider, installed
#     from its lockfile; Node 22 from the lockfile's `node` package), resource = vidforge's /mcp;
#   - `vidforge serve --oauth-issuer <that server>` (no static tokens);
#   - the Python `mcp` 2.x SDK's OAuthClientProvider starting with no token: 401, resource metadata,
#     authorization-server discovery, dynamic registration, code flow with PKCE and `resource`,
#     then an upload and a render with the token it obtained: clients/python/oauth_render.py;
#   - headless Chromium signing in to the approval page through the same authorization server
#     (vidforge's `vidforge-browser` client, authorization code + PKCE) and approving:
#     tests/browser/oauth_sign_in.py (Debian's chromium, chromium-driver, python3-selenium).
# Builds nothing: expects target/release/vidforge (or $VIDFORGE_BIN). Exits non-zero on failure,
# printing both servers' logs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
[ -x "$BIN" ] || { echo "run-oauth-clients: $BIN is missing; build it first (make build)" >&2; exit 2; }
command -v npm >/dev/null || { echo "run-oauth-clients: npm is required (the authorization server runs on a project-local Node 22)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run-oauth-clients: python3 (>= 3.10) is required" >&2; exit 2; }
started=$SECONDS

# Dependencies, from lockfiles, only when missing or stale.
# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
AS_DIR="$ROOT/tests/oauth"
npm_install "$AS_DIR"
NODE="$AS_DIR/node_modules/.bin/node"
PY="$ROOT/clients/python"
py_venv "$PY"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AS_PORT="$(free_port)"
SERVE_PORT="$(free_port)"
[ "$AS_PORT" != "$SERVE_PORT" ] || SERVE_PORT="$(free_port)"
ISSUER="http://127.0.0.1:$AS_PORT"
RESOURCE="http://127.0.0.1:$SERVE_PORT/mcp"

# shellcheck source=lib/serve.sh
source "$ROOT/scripts/lib/serve.sh"
# start_vidforge traps EXIT with stop_vidforge: wrap it so the authorization server goes too.
eval "serve_$(declare -f stop_vidforge)"
AS_PID=""
AS_TMP="$(mktemp -d)"
stop_vidforge() {
  if [ -n "$AS_PID" ]; then kill "$AS_PID" 2>/dev/null || true; wait "$AS_PID" 2>/dev/null || true; fi
  rm -rf "$AS_TMP"
  serve_stop_vidforge
}
trap stop_vidforge EXIT

# The authorization server first: vidforge fetches the issuer's keys at start-up, and after a
# failed fetch it refuses unknown key ids for 30 s (REFETCH_INTERVAL) before fetching again.
# A browser's sign-in names no account: the server signs in vidforge-tests, the subject of
# the client-credentials token that makes the render the browser approves.
"$NODE" "$AS_DIR/authorization-server.mjs" --port "$AS_PORT" --resource "$RESOURCE" --keys "$AS_TMP/keys.json" \
  --redirect-uri "http://127.0.0.1:$SERVE_PORT/oauth/callback" --default-login vidforge-tests \
  >"$AS_TMP/as.out" 2>"$AS_TMP/as.log" &
AS_PID=$!
for _ in $(seq 1 100); do
  [ -s "$AS_TMP/as.out" ] && break
  kill -0 "$AS_PID" 2>/dev/null || { echo "run-oauth-clients: the authorization server exited early:" >&2; cat "$AS_TMP/as.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$AS_TMP/as.out" ] || { echo "run-oauth-clients: the authorization server is not ready" >&2; cat "$AS_TMP/as.log" >&2; exit 1; }

start_vidforge run-oauth-clients --oauth-issuer "$ISSUER" \
  --oauth-browser-client-id vidforge-browser --oauth-browser-client-secret vidforge-browser-secret
[ "$BASE/mcp" = "$RESOURCE" ] || { echo "run-oauth-clients: vidforge is at $BASE, not $RESOURCE" >&2; exit 1; }
echo "run-oauth-clients: authorization server $(head -n 1 "$AS_TMP/as.out"), vidforge $BASE ($((SECONDS - started)) s)"

# Fixture: a short 320x180 clip with audio (uploaded by the client, with its token).
ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=320x180:rate=25:duration=0.6 \
  -f lavfi -i sine=frequency=440:sample_rate=48000:duration=0.6 -c:a aac -b:a 64k \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p -shortest "$WORK/clip.mp4"

echo "== python mcp OAuthClientProvider (no token to start with)"
client_start=$SECONDS
if timeout 300 "$PY/.venv/bin/python" "$PY/oauth_render.py" "$BASE/mcp" "$WORK/clip.mp4"; then
  echo "== python mcp OAuth: PASS ($((SECONDS - client_start)) s; $((SECONDS - started)) s in all)"
else
  echo "== python mcp OAuth: FAIL ($((SECONDS - client_start)) s)" >&2
  echo "run-oauth-clients: vidforge log:" >&2
  tail -n 60 "$WORK/server.log" >&2
  echo "run-oauth-clients: authorization server log:" >&2
  tail -n 60 "$AS_TMP/as.log" >&2
  exit 1
fi

echo "== headless Chromium: sign in through the authorization server, approve"
ui_start=$SECONDS
if timeout 300 /usr/bin/python3 "$ROOT/tests/browser/oauth_sign_in.py" "$BASE" "$ISSUER" "$WORK"; then
  echo "== chromium OAuth sign-in: PASS ($((SECONDS - ui_start)) s; $((SECONDS - started)) s in all)"
else
  echo "== chromium OAuth sign-in: FAIL ($((SECONDS - ui_start)) s)" >&2
  echo "run-oauth-clients: authorization server log:" >&2
  tail -n 60 "$AS_TMP/as.log" >&2
  exit 1
fi
