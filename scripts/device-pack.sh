#!/usr/bin/env bash
# Packs what scripts/device-check.sh runs on a bare GPU machine (no Rust, no FFmpeg, no package
# registry) into two git-ignored folders of the checkout:
#   .device/bin/       vidforge (release), the fps example, the GPU test binaries (stable names)
#   .device/vf.tar.xz  those plus ffmpeg/ffprobe and every shared library they load
#                      (scripts/device/bundle.sh), for the GPU machine
#   .gl/               the Vulkan loader's .deb files (libvulkan1 and the GL/EGL stubs wgpu opens)
# Then: `scripts/device-check.sh OUT` here rehearses on lavapipe from .device/bin, and
# `scripts/device-check.sh --on-device $OUT` on the GPU machine unpacks .device and .gl first.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device/bin .gl

cargo build --release -p vidforge --bin vidforge
cargo build --release -p vidforge-gpu --example fps
# The test binaries' paths, from cargo's JSON messages.
test_binary() {
  cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$2" | tail -n1
}
cp target/release/vidforge .device/bin/vidforge
cp target/release/examples/fps .device/bin/fps
cp "$(test_binary vidforge-gpu compose)" .device/bin/gpu-compose-tests
# The media engine's test binary; device-check.sh runs its `gpu::` module.
cp "$(test_binary vidforge-media engine)" .device/bin/media-gpu-tests

scripts/device/bundle.sh .device/vf.tar.xz .device/bin/* "$(command -v ffmpeg)" "$(command -v ffprobe)"

# The Vulkan loader (the GPU machine has the NVIDIA ICD but no loader).
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p /tmp/amd64/partial
  # shellcheck disable=SC2086
  apt-get $o update -qq
  # shellcheck disable=SC2086
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .device/vf.tar.xz .gl
echo "packed: carry .device and .gl; run: bash scripts/device-check.sh --on-device \$OUT"
