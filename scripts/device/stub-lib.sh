#!/usr/bin/env bash
# Copied from the project's device notes (shared/tools/device/stub-lib.sh, 2026-11-30).
# stub-lib.sh LIB OUT: writes a stand-in for shared library LIB with the same soname and the same
# exported names (functions abort, objects are zero-filled), so programs that link it but never
# use it at run time load without it. Keeps the device bundle under the transfer limit.
set -euo pipefail
lib=$1; out=$2
soname=$(objdump -p "$lib" | awk '/SONAME/{print $2}')
c=$(mktemp --suffix=.c)
echo '#include <stdlib.h>' > "$c"
nm -D -S --defined-only "$lib" | while read -r a b c2 d; do
  if [ -n "${d:-}" ]; then size=$((16#$b)); type=$c2; name=$d; else size=0; type=$b; name=$c2; fi
  case "$name" in _init|_fini|_edata|_end|__bss_start) continue;; esac
  case "$type" in
    T|t|W|i) echo "void $name(void){abort();}";;
    D|d|B|b|R|r|V|v|G|S) [ "$size" -gt 0 ] || size=8; echo "char $name[$size] __attribute__((aligned(16)));";;
  esac
done >> "$c"
gcc -shared -fPIC -w -o "$out" -Wl,-soname,"$soname" "$c"
rm -f "$c"
