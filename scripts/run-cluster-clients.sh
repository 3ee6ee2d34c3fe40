#!/usr/bin/env bash
# The official SDK clients (scripts/run-clients.sh) through the nginx gateway of a fresh
# three-node cluster on PostgreSQL (scripts/cluster.sh), on loopback, in a temp state dir that
# is removed afterwards. Builds nothing: expects target/release/vidforge (or $VIDFORGE_BIN).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export VIDFORGE_BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
STATE="$(mktemp -d)/cluster"
export VIDFORGE_CLUSTER_DIR="$STATE"
# A free gateway port (the cluster's own ports are picked free by cluster.sh).
VIDFORGE_CLUSTER_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export VIDFORGE_CLUSTER_PORT
cleanup() {
  "$ROOT/scripts/cluster.sh" down --purge >/dev/null 2>&1 || true
  rm -rf "$(dirname "$STATE")"
}
trap cleanup EXIT

# Output to a file, not a pipe: the servers cluster.sh starts must not hold our stdout.
if ! "$ROOT/scripts/cluster.sh" up >"$STATE.up.log" 2>&1; then
  cat "$STATE.up.log" >&2
  exit 1
fi
set -a
# shellcheck source=/dev/null
. "$STATE/cluster.env"
set +a
echo "run-cluster-clients: ${VIDFORGE_NODES} nodes behind $VIDFORGE_CLUSTER_URL"
VIDFORGE_URL="$VIDFORGE_CLUSTER_URL" VIDFORGE_TOKEN="$VIDFORGE_CLUSTER_TOKEN" \
  "$ROOT/scripts/run-clients.sh"
# Proof that the requests were spread: which nodes nginx sent them to.
echo "run-cluster-clients: requests per node:"
grep -o 'upstream=127\.0\.0\.1:[0-9]*' "$NGINX_ACCESS_LOG" | sort | uniq -c
