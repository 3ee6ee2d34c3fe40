#!/usr/bin/env bash
# First contact: what a newcomer does, checked the way a newcomer does it.
#
#   scripts/first-contact.sh [--then-test] [--then-lint] [REV]        (REV defaults to HEAD)
#
#  1. `git clone` of REV into an empty temporary folder: nothing beside it (no reference folders), no
#     build directory (only the cargo registry cache in ~/.cargo is reused).
#  2. `make serve` there, exactly as the README says. The check fails at once, loudly, if
#     127.0.0.1:8080 (or FIRST_CONTACT_PORT) is already taken, and if make exits early.
#  3. Once it prints that it listens: every command block marked `<!-- first-contact -->` in the
#     README and in the docs pages it points to (docs/gpu.md, docs/cluster.md, docs/bench/README.md)
#     runs verbatim, in order, in the clone (fixtures, CLI probe and render, curl upload,
#     `assets add --server`, the Python SDK quickstart); then server/discover and one small
#     render through `tasks/*` (scripts/lib/task_render.py), its result checked with ffprobe.
#  4. SIGTERM to make: the server must stop cleanly ("vidforge stopped") within a bound; then
#     `make serve` again on the same data dir, stopped with Ctrl-C (SIGINT to its process group).
#  5. With --then-test: `make test` in the same clone (CI's `.ci/run` does this), so the whole
#     suite runs with nothing beside the repository, on the dependencies `make serve` compiled.
#  6. With --then-lint: `make lint` in the same clone (CI does this too; its check build shares
#     the build scripts and proc macros of the release build), beside make test's script suites
#     when both are asked for.
#
# Each phase's wall time goes to $VIDFORGE_TIMINGS when set (scripts/lib/timing.sh).
#
# Only committed work is checked (it is a clone). Exits non-zero, saying why, on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/timing.sh
source "$ROOT/scripts/lib/timing.sh"
THEN_TEST=0
THEN_LINT=0
REV=HEAD
for arg in "$@"; do
  case "$arg" in
    --then-test) THEN_TEST=1 ;;
    --then-lint) THEN_LINT=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "first-contact: unknown option $arg" >&2; exit 2 ;;
    *) REV="$arg" ;;
  esac
done
PORT="${FIRST_CONTACT_PORT:-8080}"
BUILD_TIMEOUT_S="${FIRST_CONTACT_BUILD_TIMEOUT_S:-2400}" # a release build from scratch on 2 cores
BLOCK_TIMEOUT_S=600
STOP_TIMEOUT_S=20

step() { echo "== first-contact: $*"; }
die() {
  echo "first-contact: FAIL: $*" >&2
  if [ -n "${LOG:-}" ] && [ -f "$LOG" ]; then
    echo "--- last lines of make serve's output:" >&2
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}

COMMIT="$(git -C "$ROOT" rev-parse --verify "$REV^{commit}")" || die "no such revision: $REV"

# 0. The port must be free: otherwise `make serve` would fail after a long build, or the checks
#    would talk to somebody else's server.
port_free() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(1)
except OSError as e:
    print(e, file=sys.stderr)
    sys.exit(1)
PY
}
port_free "$PORT" || die "127.0.0.1:$PORT is already in use (by: $(ss -ltnpH "sport = :$PORT" 2>/dev/null | awk '{print $NF}' | head -1)). Stop whatever listens there, or set FIRST_CONTACT_PORT to another port."

# 1. A clone with nothing beside it.
WORK="$(mktemp -d -t vidforge-first-contact.XXXXXX)"
MAKE_PID=""
cleanup() {
  if [ -n "$MAKE_PID" ] && kill -0 "$MAKE_PID" 2>/dev/null; then
    kill -KILL -- "-$MAKE_PID" 2>/dev/null || true
  fi
  if [ "${FIRST_CONTACT_KEEP:-0}" = 1 ]; then echo "first-contact: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
CLONE="$WORK/vidforge"
step "git clone of ${COMMIT:0:12} into $CLONE"
git clone --quiet --no-local "$ROOT" "$CLONE"
git -C "$CLONE" checkout --quiet --detach "$COMMIT"
[ "$(ls -A "$WORK")" = "vidforge" ] || die "the clone's folder is not empty beside it"
cd "$CLONE"
# The build directory is not reused; the user's environment must not point elsewhere either.
unset CARGO_TARGET_DIR CARGO_BUILD_TARGET_DIR
[ "$PORT" = 8080 ] || export VIDFORGE_LISTEN="127.0.0.1:$PORT"

# 2. `make serve`, in its own process group (as a terminal runs it).
LOG="$WORK/serve.log"
start_serve() {
  : >"$LOG"
  setsid make serve >"$LOG" 2>&1 </dev/null &
  MAKE_PID=$!
  local waited=0
  until grep -q '^vidforge listening on ' "$LOG"; do
    kill -0 "$MAKE_PID" 2>/dev/null || { wait "$MAKE_PID" || true; die "make serve exited before it served"; }
    [ "$waited" -lt "$BUILD_TIMEOUT_S" ] || die "make serve did not serve within $BUILD_TIMEOUT_S s"
    sleep 1
    waited=$((waited + 1))
  done
  until grep -q '^Ready\.' "$LOG"; do
    kill -0 "$MAKE_PID" 2>/dev/null || die "make serve exited while starting"
    sleep 0.2
  done
  MCP_URL="$(awk '$1 == "MCP" && $2 == "endpoint" {print $3}' "$LOG")"
  BASE="${MCP_URL%/mcp}"
  [ "$MCP_URL" = "http://127.0.0.1:$PORT/mcp" ] || die "make serve printed MCP endpoint '$MCP_URL', expected http://127.0.0.1:$PORT/mcp"
  curl -fsS "$BASE/healthz" >/dev/null || die "$BASE/healthz does not answer"
}

# Waits (bounded) for make and the server under it to exit after a signal; the server must say
# it stopped. $1 names the signal in messages.
await_stop() {
  local i
  for i in $(seq 1 $((STOP_TIMEOUT_S * 10))); do
    kill -0 "$MAKE_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$MAKE_PID" 2>/dev/null; then
    die "make serve still running $STOP_TIMEOUT_S s after $1"
  fi
  wait "$MAKE_PID" || true
  if pgrep -g "$MAKE_PID" >/dev/null 2>&1; then
    die "processes of make serve outlived it after $1: $(pgrep -a -g "$MAKE_PID")"
  fi
  MAKE_PID=""
  grep -q '^vidforge stopped$' "$LOG" || die "the server did not report a clean stop after $1"
  if grep -qE 'panicked|ERROR' "$LOG"; then die "errors in the server's output after $1"; fi
}

step "make serve (release build from scratch; up to $BUILD_TIMEOUT_S s)"
start=$SECONDS
timed "first contact: make serve (cold release build, until it serves)" start_serve
step "serving after $((SECONDS - start)) s:"
sed -n '/^vidforge listening on /,/^Ready\./p' "$LOG"

# 3. The commands of the README and of the docs pages it points to, verbatim, in this order
#    (later pages build on what the README's blocks made: clip.mp4, logo.png).
BLOCKS="$WORK/readme-blocks"
mkdir -p "$BLOCKS"
python3 - "$BLOCKS" README.md docs/configuration.md docs/gpu.md docs/cluster.md \
  docs/bench/README.md docs/development.md <<'PY'
import pathlib, sys
out, n = pathlib.Path(sys.argv[1]), 0
for page in sys.argv[2:]:
    lines = pathlib.Path(page).read_text().splitlines()
    found, i = 0, 0
    while i < len(lines):
        if lines[i].strip() == "<!-- first-contact -->":
            j = i + 1
            if j >= len(lines) or lines[j].strip() not in ("```sh", "```bash"):
                sys.exit(f"{page}:{i + 1}: <!-- first-contact --> must stand right above a ```sh block")
            k = j + 1
            while k < len(lines) and lines[k].strip() != "```":
                k += 1
            n += 1
            found += 1
            slug = page.replace("/", "_").removesuffix(".md")
            (out / f"{n:02d}-{slug}.sh").write_text("\n".join(lines[j + 1:k]) + "\n")
            i = k
        i += 1
    if page == "README.md" and found < 4:
        sys.exit(f"README.md has only {found} blocks marked <!-- first-contact --> (expected at least 4)")
print(n)
PY
nblocks="$(find "$BLOCKS" -name '*.sh' | wc -l)"
[ "$nblocks" -ge 8 ] || die "the README and its docs pages have only $nblocks blocks marked <!-- first-contact --> (expected at least 8)"
for block in "$BLOCKS"/*.sh; do
  step "block $(basename "$block" .sh) of $nblocks:"
  sed 's/^/    $ /' "$block"
  # The README speaks of the default port.
  [ "$PORT" = 8080 ] || sed -i "s/127\.0\.0\.1:8080/127.0.0.1:$PORT/g" "$block"
  timed "first contact: block $(basename "$block" .sh)" timeout "$BLOCK_TIMEOUT_S" bash -euo pipefail "$block" \
    || die "block $(basename "$block" .sh) failed (exit $?)"
done

step "server/discover and one small render through tasks/*"
[ -f clip.mp4 ] || die "the README's blocks did not make clip.mp4"
SOURCE="$(curl -fsS -H 'Content-Type: application/octet-stream' --data-binary @clip.mp4 "$BASE/assets?name=clip.mp4" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uri"])')"
timed "first contact: a render through tasks/*" python3 scripts/lib/task_render.py "$BASE" "$SOURCE" "$WORK/task-result.mp4" \
  || die "the render through tasks/* failed"
size="$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0 "$WORK/task-result.mp4")"
[ "$size" = "1280,720" ] || die "the rendered video is '$size', expected 1280,720"
echo "  ok: the result decodes at 1280x720"

# 4. Stop cleanly: SIGTERM to make (as a service manager would), then Ctrl-C on a restart.
step "SIGTERM to make serve"
kill -TERM "$MAKE_PID"
await_stop SIGTERM
echo "  ok: stopped cleanly"
step "make serve again on the same data dir, then Ctrl-C"
start_serve
curl -fsS -o "$WORK/again.mp4" "$(cat "$WORK/task-result.mp4.url")" || die "after a restart the finished render is not downloadable"
cmp -s "$WORK/again.mp4" "$WORK/task-result.mp4" || die "after a restart the finished render's file differs"
echo "  ok: the finished render is still served after the restart"
kill -INT -- "-$MAKE_PID"
await_stop Ctrl-C
echo "  ok: stopped cleanly"

step "PASS: make serve works from a bare clone of ${COMMIT:0:12}"

# 5. The whole test suite in the same bare clone.
if [ "$THEN_TEST" = 1 ]; then
  # With --then-lint, make test runs `make lint` beside its script suites (VIDFORGE_TEST_LINT).
  step "make test in the bare clone"
  VIDFORGE_TEST_LINT="$THEN_LINT" make test # times its own phases
elif [ "$THEN_LINT" = 1 ]; then
  step "make lint in the bare clone"
  timed "make lint (rustfmt, clippy, rustdoc; release profile)" make lint
fi
