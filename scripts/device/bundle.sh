#!/usr/bin/env bash
# Copied from the project's device notes (shared/tools/device/bundle.sh, 2026-11-30); kept here so
# the repository packs its own device check (scripts/device-pack.sh).
# bundle.sh OUT_TAR_XZ BIN...: packs release binaries and every shared library they load into one
# xz tarball (bin/, lib/) that runs on a bare x86-64 machine with a newer glibc, e.g. the GPU
# machine, which has no FFmpeg and reaches no package registry.
#  - glibc, libstdc++ and libgcc_s stay out (the target's own, newer ones are used);
#  - libraries FFmpeg links but a render never calls (ICU data, codec2, flite voices) are replaced
#    by stand-ins with the same names (stub-lib.sh), which keeps the tarball near 52 MB.
# Run there with: tar -xJf X -C /tmp/vf; LD_LIBRARY_PATH=/tmp/vf/lib PATH=/tmp/vf/bin:$PATH ...
set -euo pipefail
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in "$@"; do cp -L "$b" "$stage/bin/"; done
# Symbols are dead weight there (a panic still names its message); stripped, the bundle fits the
# device tool's 64 MiB working-tree limit with room to spare.
strip "$stage"/bin/* 2>/dev/null || true
for b in "$stage"/bin/*; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u | while read -r l; do
  [ -n "$l" ] || continue
  case "$(basename "$l")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*|libutil.so*|libstdc++.so*|libgcc_s.so*) continue;;
  esac
  cp -L "$l" "$stage/lib/"
done
# Also SVG, LAPACK, the AV1 encoders, SDL and libplacebo: FFmpeg links them, vidforge
# and the check never call them, and stubbed they keep the bundle near 52 MB. (Libraries with
# versioned symbols, e.g. libgfortran, libjxl, libdb, cannot be stubbed this way; libopenmpt
# is called by every format probe.)
for l in "$stage"/lib/libicudata.so.* "$stage"/lib/libcodec2.so.* "$stage"/lib/libflite_cmu_us_*.so.* \
  "$stage"/lib/librsvg-2.so.* "$stage"/lib/liblapack.so.* "$stage"/lib/libSvtAv1Enc.so.* \
  "$stage"/lib/librav1e.so.* "$stage"/lib/libSDL2-2.0.so.* \
  "$stage"/lib/libplacebo.so.*; do
  [ -f "$l" ] || continue
  "$here/stub-lib.sh" "$l" "$l.stub" && mv "$l.stub" "$l"
done
tar -C "$stage" -cf - bin lib | xz -T0 -6 > "$out"
ls -la "$out"
