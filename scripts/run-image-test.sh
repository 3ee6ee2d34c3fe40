#!/usr/bin/env bash
# The container image, end to end (part of `make test`):
#  1. builds it (scripts/image.sh: localhost/vidforge:latest from target/release/vidforge, or
#     VIDFORGE_BIN);
#  2. starts it with podman: a named volume on /data, a bearer token and the public base URL
#     from the environment, port 8080 published on 127.0.0.1 only; waits for /healthz from the
#     host and runs the image's own HEALTHCHECK;
#  3. from the host: uploads a clip and a PNG, renders with the watermark over MCP (tasks
#     extension), approves it (tasks/update), downloads the result and checks it with ffprobe
#     (scripts/lib/approve_render.py);
#  4. `podman stop` (SIGTERM): the container must exit 0 within STOP_TIMEOUT_S, its log saying
#     "vidforge stopped";
#  5. a new container on the same volume: the earlier task is still completed and its result
#     downloads byte for byte the same.
# Fails (never skips) when podman cannot run the image. Every wait is bounded; on failure the
# container's log is printed; containers, the volume and the temporary folder go on exit.
#
# PODMAN_RUN_FLAGS: extra `podman run` flags. The default (`--runtime runc`, RLIMIT_NOFILE as
# this shell's, RLIMIT_NPROC 1000) suits CI hosts where crun fails on hybrid cgroups and podman's
# default ulimits cannot be set; an ordinary host needs none of it (docs/deploy.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
IMAGE="${VIDFORGE_IMAGE:-localhost/vidforge}:latest"
TOKEN="image-test-$RANDOM$RANDOM"
STOP_TIMEOUT_S=20
READY_TIMEOUT_S=60
lim() { local v; v="$(ulimit "$1")"; [ "$v" = unlimited ] && echo -1 || echo "$v"; }
PODMAN_RUN_FLAGS="${PODMAN_RUN_FLAGS:---runtime runc --ulimit nofile=$(lim -Sn):$(lim -Hn) --ulimit nproc=1000:1000}"

WORK="$(mktemp -d -t vidforge-image-test.XXXXXX)"
NAME="vidforge-image-test-$$"
VOLUME="vidforge-image-test-$$"
CURRENT=""
step() { echo "== image-test: $*"; }
die() {
  echo "image-test: FAIL: $*" >&2
  if [ -n "$CURRENT" ]; then
    echo "--- log of container $CURRENT:" >&2
    podman logs "$CURRENT" 2>&1 | tail -n 60 >&2 || true
    # Again after the log, so that a CI tail shows the reason.
    echo "image-test: FAIL: $*" >&2
  fi
  exit 1
}
cleanup() {
  podman rm -f -t 0 "$NAME-1" "$NAME-2" >/dev/null 2>&1 || true
  podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

step "make the image"
start=$SECONDS
if [ -z "${VIDFORGE_BIN:-}" ]; then
  # The release binary of this checkout (a no-op when it is up to date).
  cargo build --release -p vidforge --bin vidforge
fi
./scripts/image.sh || die "scripts/image.sh failed"
step "image built in $((SECONDS - start)) s"
podman info >/dev/null 2>&1 || die "podman cannot run here: $(podman info 2>&1 | tail -n 3)"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"
podman volume create "$VOLUME" >/dev/null

# Starts container $1 on the volume and waits until /healthz answers from the host.
run_container() {
  CURRENT="$1"
  # shellcheck disable=SC2086
  podman run -d --name "$CURRENT" $PODMAN_RUN_FLAGS \
    -p "127.0.0.1:$PORT:8080" -v "$VOLUME:/data" \
    -e VIDFORGE_TOKENS="$TOKEN=image-test" -e VIDFORGE_PUBLIC_BASE_URL="$BASE" \
    "$IMAGE" >/dev/null || die "podman run failed"
  local i
  for i in $(seq 1 $((READY_TIMEOUT_S * 5))); do
    curl -fsS -o /dev/null --max-time 2 "$BASE/healthz" 2>/dev/null && break
    [ "$(podman inspect -f '{{.State.Running}}' "$CURRENT")" = true ] || die "the container exited while starting"
    sleep 0.2
  done
  curl -fsS --max-time 2 "$BASE/healthz" >"$WORK/healthz.json" || die "no /healthz on $BASE within $READY_TIMEOUT_S s"
  echo "  ok: $CURRENT serves $BASE: $(cat "$WORK/healthz.json")"
  timeout 30 podman healthcheck run "$CURRENT" || die "the image's HEALTHCHECK fails in $CURRENT"
  echo "  ok: podman healthcheck run: healthy"
}

# Stops container $1 with SIGTERM; it must exit 0 within STOP_TIMEOUT_S, saying so.
stop_container() {
  local t0=$SECONDS
  # -t: podman sends SIGKILL only after this; a clean stop is well within it.
  timeout $((STOP_TIMEOUT_S + 30)) podman stop -t $((STOP_TIMEOUT_S + 10)) "$1" >/dev/null || die "podman stop failed"
  local took=$((SECONDS - t0)) code
  code="$(podman inspect -f '{{.State.ExitCode}}' "$1")"
  [ "$took" -le "$STOP_TIMEOUT_S" ] || die "$1 took $took s to stop after SIGTERM (bound $STOP_TIMEOUT_S s)"
  [ "$code" = 0 ] || die "$1 exited with code $code after SIGTERM"
  # The whole log first: `podman logs | grep -q` under pipefail fails at random when grep
  # exits on its match while podman is still writing (SIGPIPE).
  podman logs "$1" >"$WORK/stop.log" 2>&1 || die "podman logs $1 failed"
  grep -q '^vidforge stopped$' "$WORK/stop.log" || die "$1 did not log 'vidforge stopped'"
  echo "  ok: $1 stopped cleanly on SIGTERM in $took s (exit 0, 'vidforge stopped')"
}

step "start $NAME-1 (volume $VOLUME on /data, $BASE)"
t0=$SECONDS
run_container "$NAME-1"

step "upload, render with a watermark, approve, download"
ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=25:duration=2 \
  -f lavfi -i sine=frequency=440:duration=2 -c:v libx264 -pix_fmt yuv420p -c:a aac -shortest \
  "$WORK/clip.mp4" || die "cannot make the fixture clip"
ffmpeg -hide_banner -loglevel error -y -f lavfi -i 'color=c=white@0.5:s=240x80,format=rgba' \
  -frames:v 1 "$WORK/logo.png" || die "cannot make the fixture logo"
upload() {
  curl -fsS --max-time 60 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/octet-stream' \
    --data-binary "@$1" "$BASE/assets?name=$(basename "$1")" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["uri"])'
}
CLIP="$(upload "$WORK/clip.mp4")" || die "upload of clip.mp4 failed"
LOGO="$(upload "$WORK/logo.png")" || die "upload of logo.png failed"
echo "  ok: uploaded $CLIP, $LOGO"
python3 scripts/lib/approve_render.py render "$BASE" "$TOKEN" "$CLIP" "$LOGO" "$WORK/out.mp4" \
  | tee "$WORK/render.log" || die "the render with approval failed"
TASK="$(tail -n 1 "$WORK/render.log")"
size="$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0 "$WORK/out.mp4")"
[ "$size" = "1280,720" ] || die "the rendered video is '$size', expected 1280,720"
echo "  ok: the result decodes at 1280x720"

step "podman stop (SIGTERM)"
stop_container "$NAME-1"

step "a new container $NAME-2 on the same volume"
run_container "$NAME-2"
python3 scripts/lib/approve_render.py check "$BASE" "$TOKEN" "$TASK" "$WORK/again.mp4" \
  || die "the earlier render is gone after the restart"
cmp -s "$WORK/out.mp4" "$WORK/again.mp4" || die "after the restart the result's bytes differ"
echo "  ok: the earlier render's result is the same after the restart"
stop_container "$NAME-2"
CURRENT=""

step "PASS ($(podman image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1 / 1e6}') image; run $((SECONDS - t0)) s, all $((SECONDS - start)) s)"
