#!/usr/bin/env bash
# Builds the OCI image localhost/vidforge:latest (and :VERSION) from Debian 12 packages, with no
# container registry: `make image` (scripts/image.sh) calls this after the release build.
#
#  1. mmdebstrap --variant=extract unpacks PACKAGES below and their dependencies from Debian's
#     mirror into a pool (no maintainer scripts; the .deb files of the last build are kept in
#     CACHE, so a rebuild downloads only what changed).
#  2. deploy/image/stage.py copies from the pool only what vidforge loads (the binary's shared
#     libraries, the Vulkan loader, Mesa's lavapipe, bash for the health check, CA roots, ...)
#     and adds the non-root user vidforge (10001), /data and /tmp.
#  3. buildah commits that tree as one layer on `scratch` (docker format, for HEALTHCHECK).
#
# Environment: VIDFORGE_BIN (default target/release/vidforge), VIDFORGE_IMAGE (default
# localhost/vidforge), VIDFORGE_IMAGE_CACHE (default ~/.cache/vidforge-image),
# VIDFORGE_IMAGE_MIRROR (default: the Debian bookworm mirror this host's apt uses). See
# docs/deploy.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${VIDFORGE_BIN:-$ROOT/target/release/vidforge}"
IMAGE="${VIDFORGE_IMAGE:-localhost/vidforge}"
CACHE="${VIDFORGE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vidforge-image}"
# The mirror of this host's apt sources that serves Debian bookworm (the image's base), read
# from apt's package lists (fetched first if there are none yet).
host_mirror() {
  apt-get indextargets --format '$(REPO_URI)' \
    'Created-By: Packages' 'Label: Debian' 'Codename: bookworm' 2>/dev/null | head -n 1
}
MIRROR="${VIDFORGE_IMAGE_MIRROR:-$(host_mirror)}"
if [ -z "$MIRROR" ] && [ "$(id -u)" -eq 0 ]; then
  apt-get update -q >/dev/null && MIRROR="$(host_mirror)"
fi
[ -n "$MIRROR" ] || { echo "image: no Debian bookworm mirror in this host's apt sources; set VIDFORGE_IMAGE_MIRROR" >&2; exit 1; }
# server.json's name: the OCI label the MCP registry checks the image against.
MCP_NAME="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$ROOT/server.json")"

# Runtime packages: FFmpeg 5.1 (the libraries ffmpeg-next links), the Vulkan loader, Mesa's
# Vulkan drivers (lavapipe), libglvnd and X11 client libraries (the NVIDIA Vulkan ICD, mounted
# in from the host, needs them), CA roots, bash (the health check). stage.py takes from these
# only the files vidforge loads and fails if a library it needs is in none of them.
PACKAGES=(
  libc6 libgcc-s1 bash ca-certificates
  libavcodec59 libavformat59 libavutil57 libswscale6 libswresample4 libavfilter8 libavdevice59
  libvulkan1 mesa-vulkan-drivers libglvnd0 libx11-6 libxext6
)

die() { echo "image: FAIL: $*" >&2; exit 1; }
[ -x "$BIN" ] || die "no vidforge binary at $BIN: run 'make build' first (or set VIDFORGE_BIN)"
for tool in mmdebstrap buildah python3 ldconfig; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run scripts/image.sh (installs it)"
done
VERSION="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' "$ROOT/Cargo.toml")"

WORK="$(mktemp -d -t vidforge-image.XXXXXX)"
CTR=""
cleanup() {
  [ -z "$CTR" ] || buildah rm "$CTR" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$CACHE/debs"
start=$SECONDS

echo "image: unpacking Debian bookworm packages (.deb cache: $CACHE/debs)"
mmdebstrap --quiet --variant=extract --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
  --setup-hook="sync-in '$CACHE/debs' /var/cache/apt/archives/" \
  --extract-hook="rm -f '$CACHE/debs/'*.deb && cp \"\$1\"/var/cache/apt/archives/*.deb '$CACHE/debs/'" \
  bookworm "$WORK/pool" "$MIRROR"
echo "image: pool ready after $((SECONDS - start)) s"

python3 "$HERE/stage.py" "$WORK/pool" "$WORK/rootfs" "$BIN" "$HERE/healthcheck"
# One tar with the image's ownership: root everywhere, the vidforge user on /data.
python3 - "$WORK/rootfs" "$WORK/rootfs.tar" <<'PY'
import sys, tarfile
src, dst = sys.argv[1:3]
def own(ti):
    ti.uid = ti.gid = 10001 if ti.name in ("data", "./data") else 0
    ti.uname = ti.gname = ""
    return ti
with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as t:
    t.add(src, arcname=".", filter=own)
PY

old="$(buildah images --quiet --no-trunc "$IMAGE:latest" 2>/dev/null || true)"
CTR="$(buildah from --quiet --format docker scratch)"
buildah add --quiet "$CTR" "$WORK/rootfs.tar" / >/dev/null
buildah config \
  --entrypoint '["/usr/local/bin/vidforge"]' --cmd serve \
  --env PATH=/usr/local/bin:/usr/bin:/bin \
  --env VIDFORGE_LISTEN=0.0.0.0:8080 --env VIDFORGE_DATA_DIR=/data \
  --env XDG_RUNTIME_DIR=/tmp --env XDG_CACHE_HOME=/tmp/.cache \
  --user 10001:10001 --workingdir /data --volume /data --port 8080/tcp \
  --stop-signal SIGTERM \
  --healthcheck 'CMD /usr/local/bin/vidforge-healthcheck' --healthcheck-interval 30s \
  --healthcheck-timeout 5s --healthcheck-start-period 30s --healthcheck-retries 3 \
  --os linux --arch amd64 \
  --label org.opencontainers.image.title=vidforge \
  --label "org.opencontainers.image.version=$VERSION" \
  --label org.opencontainers.image.description="GPU-accelerated video render service (MCP over streamable HTTP)" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "io.modelcontextprotocol.server.name=$MCP_NAME" \
  "$CTR"
buildah commit --quiet --format docker --rm "$CTR" "$IMAGE:latest" >/dev/null
CTR=""
buildah tag "$IMAGE:latest" "$IMAGE:$VERSION"
new="$(buildah images --quiet --no-trunc "$IMAGE:latest")"
# The image this build replaced, unless a container still uses it.
if [ -n "$old" ] && [ "$old" != "$new" ]; then buildah rmi "$old" >/dev/null 2>&1 || true; fi

size="$(podman image inspect --format '{{.Size}}' "$IMAGE:latest")"
echo "image: $IMAGE:latest ($IMAGE:$VERSION) built in $((SECONDS - start)) s, $((size / 1000000)) MB"
