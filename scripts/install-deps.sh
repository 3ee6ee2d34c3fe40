#!/usr/bin/env bash
# Installs the system packages vidforge needs on Debian 12. Idempotent: installs only what is
# missing, so `make test` and `make serve` can call it every time.
set -euo pipefail

PACKAGES=(
  # Build: FFmpeg 5.1 development headers for ffmpeg-next, and clang for its bindgen.
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev
  libavfilter-dev libavdevice-dev libclang-dev clang pkg-config
  # Software Vulkan adapter (Mesa lavapipe) so the wgpu path runs without a GPU.
  mesa-vulkan-drivers
  # The ffmpeg CLI: test fixtures and the benchmark's reference runs.
  ffmpeg
  # strace: the durability test checks the fsync / rename order of uploads and results.
  strace
  # mkvmerge: the HDR test clips carry their mastering metadata in Matroska (ffmpeg 5.1's CLI
  # cannot write it; media/fixtures/src/hdr.rs `hdr_clip`).
  mkvtoolnix
  # Cluster mode and its tests (scripts/cluster.sh, `make cluster`): PostgreSQL 15, the shared
  # store of the nodes, and nginx, the gateway in front of them. The script runs private
  # instances of both in its state dir; the system services these packages set up are not used.
  postgresql nginx
  # The browser UI test (scripts/run-ui-tests.sh): headless Chromium driven by Selenium through
  # chromium-driver, and Prometheus scraping /metrics. Debian packages, so nothing downloads a
  # browser or a driver; selenium is importable by the system /usr/bin/python3. The system
  # prometheus service the package sets up is not used (the test runs its own instance).
  chromium chromium-driver python3-selenium prometheus
)

# The SDK-client and conformance checks run on a project-local Node 22 installed by npm from
# lockfiles (any npm will do), and the Python client in a venv; curl drives the test scripts.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
command -v curl >/dev/null 2>&1 || PACKAGES+=(curl)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || PACKAGES+=(python3-venv)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
