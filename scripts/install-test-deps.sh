#!/usr/bin/env bash
# Installs every package the test suites use, all at once (`make test` runs it beside the cargo
# build, which needs the CPUs while these mostly wait on the network and the disk): the Node
# folders from their lockfiles (the TypeScript SDK client, the Inspector, the authorization
# server, both conformance suites) and the Python venvs from their pinned requirements (the SDK
# clients, the S3 server, the webhook receiver, the registry schema check). Each suite installs
# what it needs itself too (a no-op after this), so it also runs alone.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
LOGS="$(mktemp -d -t vidforge-test-deps.XXXXXX)"
trap 'rm -rf "$LOGS"' EXIT
pids=()
names=()
start() {
  local name="$1"
  shift
  "$@" >"$LOGS/${name//\//_}.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}
for dir in clients/ts clients/inspector tests/oauth tests/app-host conformance conformance/legacy; do
  start "$dir" npm_install "$ROOT/$dir"
done
for dir in clients/python clients/python-legacy tests/s3 tests/webhooks tests/registry; do
  start "$dir" py_venv "$ROOT/$dir"
done
failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed+=("${names[$i]}")
    echo "install-test-deps: ${names[$i]} failed:" >&2
    cat "$LOGS/${names[$i]//\//_}.log" >&2
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "install-test-deps: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "install-test-deps: ${#names[@]} folders ready"
