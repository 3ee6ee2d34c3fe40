#!/usr/bin/env bash
# The GPU host check, one prepared run (issue 12). Usage:
#   scripts/device-check.sh OUT                 rehearsal here (lavapipe), binaries from .device/bin
#   scripts/device-check.sh --on-device OUT     on the GPU machine: unpacks .device/vf.tar.xz and
#                                               the Vulkan loader from .gl first
# (scripts/device-pack.sh builds both.) It runs, each step bounded in time and recorded even when
# it fails:
#   1. what the machine has: `vidforge probe --hardware`, nvidia-smi;
#   2. what one `vidforge serve` serves with its defaults (`vidforge bench --service`): 1 and 16
#      watermarked 1080p -> 720p renders at once over MCP against as many ffmpeg processes and
#      ffmpeg's GPU pipeline, renders/hour side by side, start-up on its own line (first after
#      the hardware: the headline figure, kept even if a later step runs out of time);
#   3. the gpu crate's tests and the media crate's GPU tests on the real adapter;
#   4. the compositor alone (fps example) at 720p / 1080p / 4k output, planar and NV12 input,
#      with the compose kernel timed by timestamp queries;
#   5. one 1080p -> 720p render per backend x decoder x encoder combination, a 10-bit HEVC
#      source (P010 from NVDEC), and the quality of each H.264 encoder against the source
#      (PSNR, side by side); then NVDEC -> wgpu compositor zero-copy against the download and
#      against software decoding, per hop (decode, download, copy in, GPU wait, readback),
#      one render at a time and several at once;
#   6. 16 1080p -> 4k renders of a shorter source through the service. GPU memory sampled
#      throughout.
# Writes at most 8 files under OUT: summary.md, gpu-tests.log, compositor.jsonl, renders.txt,
# service.md, service.json, service-4k.md, gpu-mem.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
on_device=0
if [ "${1:-}" = "--on-device" ]; then on_device=1; shift; fi
OUT=${1:?usage: device-check.sh [--on-device] OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
started=$(date +%s)
summary=$OUT/summary.md

if [ $on_device = 1 ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  mkdir -p /tmp/vf && tar -xJf .device/vf.tar.xz -C /tmp/vf
  export LD_LIBRARY_PATH=/tmp/vf/lib:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=/tmp/vf/bin:/usr/local/nvidia/bin:$PATH
  BIN=/tmp/vf/bin
  # The issue's job (20 s of 1080p30, 16 at once and 1), twice each; then 4k, once.
  SERVICE_ARGS=(--jobs 1,16 --seconds 20 --repeats 2)
  SERVICE_4K_ARGS=(--jobs 16 --seconds 4 --resolutions 4k --repeats 1)
  # Zero-copy vs download: repeats of one render, and renders at once.
  ZC_REPEATS=3 ZC_AT_ONCE=8
  # The media GPU tests require the zero-copy path here (its start-up self-test must pass).
  export VIDFORGE_REQUIRE_CUDA=1
else
  BIN=$PWD/.device/bin
  # A rehearsal on a small machine: the quick forms.
  SERVICE_ARGS=(--quick --jobs 1,2)
  SERVICE_4K_ARGS=(--jobs 2 --seconds 1 --resolutions 4k --repeats 1)
  ZC_REPEATS=1 ZC_AT_ONCE=2
fi
export WGPU_BACKEND=vulkan XDG_RUNTIME_DIR=/tmp RUST_LOG=warn VIDFORGE_REQUIRE_GPU=1 RUST_BACKTRACE=0
for b in vidforge fps gpu-compose-tests media-gpu-tests; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: run scripts/device-pack.sh first" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

say() { echo "$*" | tee -a "$summary"; }
# step NAME SECONDS LOG COMMAND...: runs in $work with a time limit, output appended to LOG;
# the exit status and time go to the summary.
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0; t0=$(date +%s)
  (cd "$work" && timeout --kill-after=10 "$limit" "$@") >> "$log" 2>&1
  local rc=$?
  say "- $name: exit $rc in $(( $(date +%s) - t0 )) s"
  return 0
}
# Why a command failed: the last line of its output (anyhow's innermost cause).
first_error() { grep -v '^[[:space:]]*$' "$1" | tail -n 1 | sed 's/^ *//'; }

: > "$summary"
say "# vidforge device check"
say ""
say "$(date -u +%FT%TZ), $(uname -m), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), mode $([ $on_device = 1 ] && echo device || echo rehearsal)"
say ""
say "## 1. Hardware"
say '```'
"$BIN/vidforge" probe --hardware 2>/dev/null | tee -a "$summary"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 | tee -a "$summary"
else
  say "nvidia-smi: not present"
fi
say '```'

# GPU memory, sampled for the rest of the run.
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 250 > "$OUT/gpu-mem.csv" 2>/dev/null &
  sampler=$!
else
  echo "no nvidia-smi: GPU memory not sampled" > "$OUT/gpu-mem.csv"
fi

say ""
say "## 2. What one vidforge serve serves: vidforge bench --service ${SERVICE_ARGS[*]}"
step "service benchmark" 420 "$work/service.log" "$BIN/vidforge" bench --service "${SERVICE_ARGS[@]}" --out "$work/service"
grep '^wrote' "$work/service.log" | sed 's/^/    /' >> "$summary"
for f in service.md service.json; do
  [ -f "$work/service/$f" ] && cp "$work/service/$f" "$OUT/$f"
done
[ -f "$OUT/service.md" ] && grep -E '^\||^Start-up|^- ' "$OUT/service.md" | tee -a "$summary"
say ""
say "## 3. GPU tests on this adapter"
tests=$OUT/gpu-tests.log
echo "### gpu crate (compose tests)" > "$tests"
step "gpu crate tests (compose pass vs CPU references)" 180 "$tests" "$BIN/gpu-compose-tests" --test-threads=1
echo "### media crate GPU tests (wgpu vs CPU compositor, NV12/P010)" >> "$tests"
step "media crate GPU tests (wgpu vs CPU compositor, NV12/P010)" 240 "$tests" "$BIN/media-gpu-tests" gpu:: --test-threads=1
grep -E "^test result" "$tests" | sed 's/^/    /' | tee -a "$summary"

say ""
say "## 4. Compositor alone (1080p source, watermark, upload + compose + readback)"
: > "$OUT/compositor.jsonl"
for out in 720p 1080p 4k; do
  # nv12-device: the frames already on the GPU, copied device to device (the zero-copy path's
  # input, no upload).
  for fmt in yuv420p nv12 nv12-device; do
    if timeout 60 "$BIN/fps" "$out" 3 "$fmt" > "$work/fps.txt" 2>&1; then
      grep -v '^{' "$work/fps.txt" | sed 's/^/    /' >> "$summary"
      grep '^{' "$work/fps.txt" >> "$OUT/compositor.jsonl"
    else
      say "    $out $fmt: failed: $(tail -n 3 "$work/fps.txt" | tr '\n' ' ')"
    fi
  done
done
cat "$OUT/compositor.jsonl"

say ""
say "## 5. Renders: backend x decoder x encoder (1080p H.264 -> 720p mp4, watermark)"
ffmpeg -hide_banner -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=10 \
  -f lavfi -i sine=frequency=440:sample_rate=48000:duration=10 -c:v libx264 -preset veryfast \
  -pix_fmt yuv420p -c:a aac -shortest "$work/src.mp4"
ffmpeg -hide_banner -v error -y -f lavfi -i "color=c=white@0.8:s=400x200,format=rgba" -frames:v 1 "$work/logo.png"
: > "$OUT/renders.txt"
for backend in cpu wgpu; do
  for hwdecode in off cuda; do
    for encoder in x264 nvenc; do
      combo="backend=$backend hwdecode=$hwdecode encoder=$encoder"
      if timeout 180 "$BIN/vidforge" render "$work/src.mp4" -o "$work/r.mp4" -r 720p --quiet \
        --watermark "$work/logo.png" --backend $backend --hwdecode $hwdecode --encoder $encoder \
        > "$work/r.txt" 2>&1; then
        echo "$combo: ok: $(head -n 3 "$work/r.txt" | sed "s#$work/##" | tr -s ' \n' ' ')" >> "$OUT/renders.txt"
      else
        echo "$combo: refused: $(first_error "$work/r.txt")" >> "$OUT/renders.txt"
      fi
      rm -f "$work/r.mp4"
    done
  done
done
# A 10-bit HEVC source: NVDEC hands over P010, which the wgpu compositor reads as is.
ffmpeg -hide_banner -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=4 \
  -c:v libx265 -preset ultrafast -pix_fmt yuv420p10le -x265-params log-level=error "$work/src10.mp4"
if timeout 180 "$BIN/vidforge" render "$work/src10.mp4" -o "$work/r10.mp4" -r 720p --quiet \
  --watermark "$work/logo.png" --backend auto > "$work/r10.txt" 2>&1; then
  echo "10-bit HEVC source, auto: ok: $(head -n 3 "$work/r10.txt" | sed "s#$work/##" | tr -s ' \n' ' ')" >> "$OUT/renders.txt"
else
  echo "10-bit HEVC source, auto: failed: $(first_error "$work/r10.txt")" >> "$OUT/renders.txt"
fi
# Quality of each H.264 encoder on the same frames (no watermark), against the source shrunk
# with the same area filter: PSNR, side by side.
for encoder in x264 nvenc; do
  if timeout 180 "$BIN/vidforge" render "$work/src.mp4" -o "$work/q-$encoder.mp4" -r 720p --quiet \
    --backend auto --encoder $encoder > "$work/q.txt" 2>&1; then
    psnr=$(ffmpeg -hide_banner -i "$work/q-$encoder.mp4" -i "$work/src.mp4" -lavfi \
      "[1:v]scale=1280:720:flags=area[ref];[0:v][ref]psnr" -f null - 2>&1 | grep -o 'average:[0-9.inf]*' | head -n1)
    size=$(stat -c %s "$work/q-$encoder.mp4")
    echo "quality $encoder: PSNR $psnr, $size bytes for 10 s" >> "$OUT/renders.txt"
  else
    echo "quality $encoder: not available: $(first_error "$work/q.txt")" >> "$OUT/renders.txt"
  fi
done
# NVDEC -> wgpu compositor: zero-copy (frames stay on the GPU), the download it replaces, and
# software decoding, on the same job; each render's hops line says where the time went.
zc_render() { # NAME HWDECODE ZERO_COPY: one render, its summary and hops on one line
  if timeout 180 "$BIN/vidforge" render "$work/src.mp4" -o "$work/$1.mp4" -r 720p --quiet \
    --watermark "$work/logo.png" --backend wgpu --encoder x264 --hwdecode "$2" --zero-copy "$3" \
    > "$work/$1.txt" 2>&1; then
    head -n 3 "$work/$1.txt" | sed "s#$work/##" | tr -s ' \n' ' '
  else
    echo "refused: $(first_error "$work/$1.txt")"
  fi
  rm -f "$work/$1.mp4"
}
for variant in "cuda on" "cuda off" "off off"; do
  read -r hw zc <<< "$variant"
  name="hwdecode=$hw zero-copy=$zc"
  for rep in $(seq 1 "$ZC_REPEATS"); do
    echo "zero-copy check, $name, run $rep: $(zc_render "zc$rep" "$hw" "$zc")" >> "$OUT/renders.txt"
  done
  t0=$(date +%s%N)
  pids=()
  for i in $(seq 1 "$ZC_AT_ONCE"); do
    zc_render "zcp$i" "$hw" "$zc" > "$work/zcp$i.line" &
    pids+=($!)
  done
  wait "${pids[@]}"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  ok=$(grep -L '^refused' "$work"/zcp*.line | wc -l)
  echo "zero-copy check, $name, $ZC_AT_ONCE at once: $ok ok in $ms ms; first: $(head -c 600 "$work/zcp1.line")" >> "$OUT/renders.txt"
  rm -f "$work"/zcp*.line
done
sed 's/^/    /' "$OUT/renders.txt" | tee -a "$summary"

say ""
say "## 6. 1080p -> 4k through the service: vidforge bench --service ${SERVICE_4K_ARGS[*]}"
step "service benchmark, 4k" 240 "$work/service-4k.log" "$BIN/vidforge" bench --service "${SERVICE_4K_ARGS[@]}" --out "$work/service-4k"
[ -f "$work/service-4k/service.md" ] && cp "$work/service-4k/service.md" "$OUT/service-4k.md"
[ -f "$OUT/service-4k.md" ] && grep -E '^\|' "$OUT/service-4k.md" | tee -a "$summary"
[ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null
if [ -s "$OUT/gpu-mem.csv" ] && command -v nvidia-smi >/dev/null; then
  say "- peak GPU memory used: $(cut -d, -f2 "$OUT/gpu-mem.csv" | sort -n | tail -n1 | tr -d ' ') MiB"
fi
say ""
say "Total $(( $(date +%s) - started )) s."
