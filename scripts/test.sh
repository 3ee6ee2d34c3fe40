#!/usr/bin/env bash
# `make test`: every test of the project, against the release build that `make serve` uses.
#
#  1. `cargo test --release --workspace --no-run`: the test binaries and the conformance build,
#     on the same compiled dependencies as `make serve` (one dependency tree: the workspace-hack
#     crate gives every member the same features, see docs/development.md); meanwhile, beside
#     it, the suites' Node and Python packages (scripts/install-test-deps.sh: network and disk,
#     while the build has the CPUs). Then a check that the tree is one: `cargo build --release
#     -p vidforge` must compile nothing.
#  2. `cargo test --release --workspace`: unit, in-process, GPU (lavapipe) and end-to-end tests;
#     the end-to-end tests drive target/release/vidforge, the binary users run.
#  3. The script suites against that binary: the official SDK clients, OAuth with a real
#     authorization server, the clients through a three-node cluster, the browser UI and
#     Prometheus, the container image, the official conformance suite.
#
# With VIDFORGE_TEST_LINT=1 (CI), `make lint` runs too, beside the script suites of step 3 (they
# mostly wait on servers, browsers and containers).
#
# A failing build stops here; a failing test or suite does not stop the others (every failure
# shows in one run). At the end: the wall time of each phase and of each test binary (work
# done beside a phase is marked ∥ and not added to the total), and the list of what failed.
# Exits non-zero if anything failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=lib/timing.sh
source scripts/lib/timing.sh
if [ -z "${VIDFORGE_TIMINGS:-}" ]; then
  VIDFORGE_TIMINGS="$(mktemp -t vidforge-test-timings.XXXXXX)"
  export VIDFORGE_TIMINGS
  trap 'rm -f "$VIDFORGE_TIMINGS"' EXIT
fi
MARK="$(timing_mark)"
CARGO="${CARGO:-cargo}"
# The GPU tests run on Mesa lavapipe and fail (not skip) when no adapter is found.
export WGPU_BACKEND=vulkan VIDFORGE_REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp RUST_LOG="${RUST_LOG:-warn}"
# The script suites run the release binaries built in step 1.
export VIDFORGE_BIN="$ROOT/target/release/vidforge"
export VIDFORGE_CONFORMANCE_BIN="$ROOT/target/release/vidforge-conformance"
step() { echo "== make test: $*"; }
failed=()
phase() {
  local name="$1"
  shift
  step "$name"
  timed "make test: $name" "$@" || failed+=("$name")
}
finish() {
  echo
  echo "== make test: wall time of each phase"
  timing_table "$MARK"
  if [ ${#failed[@]} -ne 0 ]; then
    echo "make test: FAILED: ${failed[*]}" >&2
    exit 1
  fi
  echo "make test: all passed"
}

# Runs "$@" in the background, its output in a file, timed as a row beside the phases; sets
# BESIDE_PID and BESIDE_LOG. `joined NAME` waits for it and shows its output.
beside() {
  local name="$1"
  shift
  BESIDE_LOG="$(mktemp -t vidforge-test-beside.XXXXXX)"
  (timed "  ∥ make test: $name" "$@") >"$BESIDE_LOG" 2>&1 &
  BESIDE_PID=$!
}
joined() {
  local name="$1" pid="$2" log="$3"
  if wait "$pid"; then
    step "$name (beside): done"
    tail -n 5 "$log"
  else
    step "$name (beside): FAILED"
    cat "$log"
    failed+=("$name")
  fi
  rm -f "$log"
}

step "build (release: the test binaries) and, beside it, the suites' packages"
beside "test packages (npm, pip)" ./scripts/install-test-deps.sh
deps_pid=$BESIDE_PID deps_log=$BESIDE_LOG
if ! timed "make test: build (release, test binaries)" "$CARGO" test --release --workspace --no-run; then
  failed+=("build")
  joined "test packages" "$deps_pid" "$deps_log"
  finish
fi
joined "test packages" "$deps_pid" "$deps_log"

# One dependency tree: what `make serve` builds is part of what was just built.
one_tree() {
  local out
  out="$("$CARGO" build --release -p vidforge --bin vidforge 2>&1)" || { echo "$out" >&2; return 1; }
  if grep -E '^\s+Compiling ' <<<"$out" >&2; then
    echo "make test: 'cargo build --release -p vidforge' compiled the crates above again after the" \
      "workspace build: their features differ between the two; run 'cargo hakari generate'" \
      "(docs/development.md, one dependency tree)" >&2
    return 1
  fi
  echo "  ok: make serve's build is part of the workspace build (nothing compiled twice)"
}
phase "one dependency tree" one_tree

cargo_tests() {
  "$CARGO" test --release --workspace --no-fail-fast -- --test-threads=2 2>&1 |
    python3 scripts/lib/test_binary_times.py "$VIDFORGE_TIMINGS"
}
phase "cargo test (release)" cargo_tests

if [ "${VIDFORGE_TEST_LINT:-0}" = 1 ]; then
  step "make lint, beside the script suites"
  # At nice 19: the suites' renders run at the server's render_nice (10) and must not wait on it.
  beside "make lint (rustfmt, clippy, rustdoc; release profile)" nice -n 19 make lint
  lint_pid=$BESIDE_PID lint_log=$BESIDE_LOG
fi
# Official SDK clients (Python fallback path, TypeScript task path, the legacy-era Python SDK
# and the Inspector) against a fresh server.
phase "sdk clients" ./scripts/run-clients.sh
# The Python SDK's own OAuth client with a real authorization server (oidc-provider): no token
# to start with, discovery, registration, PKCE, then a render; a browser signs in the same way.
phase "oauth clients" ./scripts/run-oauth-clients.sh
# The same SDK clients through nginx against a three-node cluster on PostgreSQL.
phase "cluster clients" ./scripts/run-cluster-clients.sh
# The browser UI (headless Chromium via Selenium) and /metrics scraped by a real Prometheus.
phase "browser ui + prometheus" ./scripts/run-ui-tests.sh
# The MCP App in a real host: the official ext-apps host bridge in headless Chromium (preview,
# Approve, the player, Reject, visibility, another principal).
phase "mcp app host" ./scripts/run-app-host-test.sh
# The container image: built, run with podman, the contract from the host, a clean stop on
# SIGTERM, its data kept across a new container.
phase "container image" ./scripts/run-image-test.sh
# The pinned official conformance suite, against conformance/expected-failures.yml.
phase "conformance" ./scripts/run-conformance.sh
if [ -n "${lint_pid:-}" ]; then
  joined "make lint" "$lint_pid" "$lint_log"
fi

finish
