#!/usr/bin/env bash
# vidforge's MCP App in a real host (issue #40): bundles the test host (tests/app-host: the
# official @modelcontextprotocol/ext-apps host bridge and @modelcontextprotocol/client, pinned
# in its package-lock.json, bundled by the pinned esbuild), starts `vidforge serve` with two
# bearer tokens (alice, bob) on a free loopback port and runs tests/app-host/host_test.py in
# Debian's headless Chromium against it. Builds nothing of vidforge: expects
# target/release/vidforge (or $VIDFORGE_BIN). Screenshots (app-preview.png, app-host.png,
# app-player.png, app-rejected.png) go to $VIDFORGE_SCREENSHOTS when set, else to the temp dir;
# on failure they and the logs are kept in a /tmp/vidforge-app-host-failure.* dir.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
PY=/usr/bin/python3
DIR="$ROOT/tests/app-host"

[ -x "$BIN" ] || { echo "run-app-host-test: $BIN is missing; build it first (make build)" >&2; exit 2; }
for exe in /usr/bin/chromium /usr/bin/chromedriver "$PY"; do
  [ -x "$exe" ] || { echo "run-app-host-test: missing $exe; run scripts/install-deps.sh" >&2; exit 2; }
done
"$PY" -c 'import selenium' 2>/dev/null || { echo "run-app-host-test: $PY cannot import selenium (python3-selenium)" >&2; exit 2; }

# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
npm_install "$DIR"
(cd "$DIR" && node_modules/.bin/esbuild src/host.js --bundle --format=esm --platform=browser \
  --target=es2022 --minify --log-level=warning --outfile=build/host.js)

# shellcheck source=lib/serve.sh
source "$ROOT/scripts/lib/serve.sh"
start_vidforge run-app-host-test --token alice-secret-token=alice --token bob-secret-token=bob
echo "run-app-host-test: vidforge at $BASE"
rc=0
"$PY" "$DIR/host_test.py" "$BASE" "$WORK" "$WORK/server.log" || rc=$?
if [ "$rc" -ne 0 ]; then
  KEEP="$(mktemp -d /tmp/vidforge-app-host-failure.XXXXXX)"
  cp -r "$WORK/server.log" "$WORK"/chromedriver-*.log "$WORK/screenshots" "$KEEP/" 2>/dev/null || true
  echo "run-app-host-test: FAILED (exit $rc); logs and screenshots kept in $KEEP" >&2
  exit "$rc"
fi
echo "run-app-host-test: passed"
