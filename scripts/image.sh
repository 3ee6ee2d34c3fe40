#!/usr/bin/env bash
# `make image`: the OCI image localhost/vidforge:latest (and :VERSION) from the release binary,
# built from Debian's packages with mmdebstrap and buildah (no container registry needed).
# Installs the tools from Debian if missing (idempotent, like scripts/install-deps.sh), then runs
# deploy/image/build.sh. VIDFORGE_BIN names another binary (default target/release/vidforge);
# docs/deploy.md describes the image.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# mmdebstrap unpacks the packages, buildah commits the image, podman runs it (and reports its
# size); runc is the runtime scripts/run-image-test.sh uses; netavark its bridge network
# (published ports, through iptables); uidmap and slirp4netns let them work rootless.
PACKAGES=(mmdebstrap buildah podman runc netavark iptables uidmap slirp4netns)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "image: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

exec "$ROOT/deploy/image/build.sh"
