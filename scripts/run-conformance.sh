#!/usr/bin/env bash
# Runs the official MCP conformance suite, pinned to @modelcontextprotocol/conformance
# 0.2.0-alpha.12 (the registry's `latest` tag is an older line testing the 2025-11-25 wire),
# against a freshly started `vidforge-conformance serve` (the conformance build: vidforge with
# the suite's fixed fixture tools, prompts, resources and tasks mounted; the production
# `vidforge` binary has none of them):
#   1. `server --requirements 2026-07-28`: every scored 2026-07-28 scenario;
#   2. every `tasks-*` scenario by `--scenario` (extension scenarios are not scored above);
#   3. the registry's `latest` line (0.1.16, conformance/legacy/), every server scenario of the
#      2025-11-25 initialize-based wire, against the same server: vidforge's legacy sessions.
# 1 and 2 use conformance/expected-failures.yml, 3 conformance/legacy/expected-failures.yml;
# each fails the run on unexpected failures and on stale entries (listed failures that pass).
# The suite needs Node >= 22; the machines have Node 20, so Node 22 comes from the npm `node`
# package installed project-locally from conformance/package-lock.json.
# Builds target/release/vidforge-conformance unless $VIDFORGE_CONFORMANCE_BIN names a prebuilt one
# (a no-op after `make build` or `make test`: one dependency tree for the whole workspace).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF="$ROOT/conformance"
if [ -z "${VIDFORGE_CONFORMANCE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet --release -p vidforge-conformance) \
    || { echo "run-conformance: cannot build vidforge-conformance" >&2; exit 2; }
fi
BIN="${VIDFORGE_CONFORMANCE_BIN:-$ROOT/target/release/vidforge-conformance}"
[ -x "$BIN" ] || { echo "run-conformance: $BIN is missing" >&2; exit 2; }
command -v npm >/dev/null || { echo "run-conformance: npm is required (Node 20 is fine; Node 22 is installed locally)" >&2; exit 2; }

# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
npm_install "$CONF"
LEGACY="$CONF/legacy"
npm_install "$LEGACY"
NODE="$CONF/node_modules/.bin/node"
SUITE="$CONF/node_modules/@modelcontextprotocol/conformance/dist/index.js"
"$NODE" -e 'process.exit(Number(process.versions.node.split(".")[0]) < 22 ? 1 : 0)' \
  || { echo "run-conformance: $NODE is not Node >= 22" >&2; exit 2; }
conformance() { "$NODE" "$SUITE" "$@"; }

# shellcheck source=lib/serve.sh
source "$ROOT/scripts/lib/serve.sh"
# The suite calls its fixed fixture tools, prompts and resources: the conformance build serves
# them beside vidforge's own.
start_vidforge run-conformance
URL="$BASE/mcp"

RESULTS="$CONF/results"
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
failed=()

echo "== conformance: scored 2026-07-28 requirement set"
if ! conformance server --url "$URL" --requirements 2026-07-28 \
    --expected-failures "$CONF/expected-failures.yml" -o "$RESULTS/requirements" >"$RESULTS/requirements.log" 2>&1; then
  failed+=("requirements 2026-07-28")
fi
sed -n '/=== SUMMARY ===/,$p' "$RESULTS/requirements.log"

mapfile -t TASK_SCENARIOS < <(conformance list --server | sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*/\1/p')
[ ${#TASK_SCENARIOS[@]} -gt 0 ] || { echo "run-conformance: the suite lists no tasks-* scenarios" >&2; exit 1; }
for scenario in "${TASK_SCENARIOS[@]}"; do
  # No --spec-version: extension scenarios run on the 2026-07-28 stateless wire by default.
  if conformance server --url "$URL" --scenario "$scenario" \
      --expected-failures "$CONF/expected-failures.yml" -o "$RESULTS/$scenario" >"$RESULTS/$scenario.log" 2>&1; then
    echo "== $scenario: as expected ($(grep -Eo 'Passed: [0-9]+/[0-9]+' "$RESULTS/$scenario.log" | head -1 || true))"
  else
    echo "== $scenario: UNEXPECTED"; sed -n '/Expected failures\|Unexpected\|Stale/,$p' "$RESULTS/$scenario.log"
    failed+=("$scenario")
  fi
done

echo "== conformance (legacy line $("$NODE" -p "require('$LEGACY/node_modules/@modelcontextprotocol/conformance/package.json').version")): every 2025-11-25 server scenario"
if "$NODE" "$LEGACY/node_modules/@modelcontextprotocol/conformance/dist/index.js" server --url "$URL" \
    --expected-failures "$LEGACY/expected-failures.yml" -o "$RESULTS/legacy" >"$RESULTS/legacy.log" 2>&1; then
  echo "== legacy 2025-11-25: as expected ($(grep -Eo 'Total: [0-9]+ passed, [0-9]+ failed' "$RESULTS/legacy.log" | head -1 || true))"
else
  sed -n '/=== SUMMARY ===/,$p' "$RESULTS/legacy.log"
  failed+=("legacy 2025-11-25")
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "run-conformance: FAILED: ${failed[*]} (logs in $RESULTS)" >&2
  exit 1
fi
echo "run-conformance: results match conformance/expected-failures.yml and conformance/legacy/expected-failures.yml (logs in $RESULTS)"
