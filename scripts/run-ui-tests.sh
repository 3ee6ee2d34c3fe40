#!/usr/bin/env bash
# End-to-end test of the browser UI (sign-in, approval page, dashboard) and of /metrics: starts
# `vidforge serve` with two bearer tokens (alice, bob) on a free loopback port and runs
# tests/browser/ui_test.py against it with a real headless Chromium (Selenium, Debian's
# chromium-driver) and a real Prometheus scraping it. The server splits long renders into
# segments (two render slots, sources over 3 s cut into segments of 1 s): the test's last step
# plays such a render in Chromium; its other sources are 1 s long, so they render in one pass.
# Nothing is downloaded: the browser, the driver, Selenium and Prometheus are the Debian
# packages scripts/install-deps.sh installs.
# Builds nothing: expects target/release/vidforge (or $VIDFORGE_BIN).
# VIDFORGE_SCREENSHOTS=docs/screenshots refreshes the committed screenshots (approval.png,
# approval-done.png, dashboard.png); otherwise they go to the temp dir. On failure the
# screenshots and logs are kept in a /tmp/vidforge-ui-failure.* dir, whose path is printed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
# Selenium is the Debian package, importable only by the system interpreter (not a pyenv/venv
# python3 that may come first on PATH).
PY=/usr/bin/python3

[ -x "$BIN" ] || { echo "run-ui-tests: $BIN is missing; build it first (make build)" >&2; exit 2; }
missing=()
for exe in /usr/bin/chromium /usr/bin/chromedriver /usr/bin/prometheus "$PY"; do
  [ -x "$exe" ] || missing+=("$exe")
done
for cmd in ffmpeg curl python3; do
  command -v "$cmd" >/dev/null || missing+=("$cmd")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "run-ui-tests: missing ${missing[*]}; run scripts/install-deps.sh (chromium chromium-driver prometheus python3-selenium ffmpeg)" >&2
  exit 2
fi
"$PY" -c 'import selenium' 2>/dev/null || {
  echo "run-ui-tests: $PY cannot import selenium; install the Debian package python3-selenium" >&2
  exit 2
}
echo "run-ui-tests: $(/usr/bin/chromium --version 2>/dev/null | head -n1), $(/usr/bin/chromedriver --version | head -n1 | cut -d' ' -f1-2), $(/usr/bin/prometheus --version 2>&1 | head -n1 | cut -d' ' -f1-3), selenium $("$PY" -c 'import selenium; print(selenium.__version__)')"

# shellcheck source=lib/serve.sh
source "$ROOT/scripts/lib/serve.sh"
start_vidforge run-ui-tests --token alice-secret-token=alice --token bob-secret-token=bob \
  --render-slots 2 --segment-min-duration 3s --segment-seconds 1s
# The test stops its Prometheus itself; should it be killed first, stop it here too.
cleanup() {
  if [ -f "$WORK/prometheus.pid" ]; then kill "$(cat "$WORK/prometheus.pid")" 2>/dev/null || true; fi
  stop_vidforge
}
trap cleanup EXIT

echo "run-ui-tests: vidforge at $BASE"
rc=0
"$PY" "$ROOT/tests/browser/ui_test.py" "$BASE" "$WORK" "$WORK/server.log" || rc=$?
if [ "$rc" -ne 0 ]; then
  KEEP="$(mktemp -d /tmp/vidforge-ui-failure.XXXXXX)"
  cp -r "$WORK/server.log" "$WORK"/prometheus.log "$WORK"/chromedriver-*.log "$WORK/screenshots" "$KEEP/" 2>/dev/null || true
  echo "run-ui-tests: FAILED (exit $rc); logs and screenshots kept in $KEEP" >&2
  exit "$rc"
fi
echo "run-ui-tests: passed"
