# Sourced by .ci/run, scripts/test.sh and scripts/first-contact.sh: wall time of each phase.
#
#   timed NAME CMD [ARGS...]   runs CMD, appends "NAME<TAB>seconds<TAB>exit status" to
#                              $VIDFORGE_TIMINGS (when set) and returns CMD's exit status.
#   timing_mark                prints how many rows $VIDFORGE_TIMINGS holds now.
#   timing_table [MARK]        prints the rows of $VIDFORGE_TIMINGS (those after MARK, a
#                              number from timing_mark) as a table with shares and a total.
# Nested scripts append to the same file when the caller exports VIDFORGE_TIMINGS, so CI's
# table holds every phase of `make test` too (names prefixed "make test: "). Rows whose name
# starts with spaces are parts of the phase that follows them (scripts/lib/test_binary_times.py).
timed() {
  local name="$1" t0="$EPOCHREALTIME" rc=0
  shift
  "$@" || rc=$?
  if [ -n "${VIDFORGE_TIMINGS:-}" ]; then
    printf '%s\t%s\t%s\n' "$name" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" "$rc" \
      >>"$VIDFORGE_TIMINGS"
  fi
  return "$rc"
}

timing_mark() {
  if [ -n "${VIDFORGE_TIMINGS:-}" ] && [ -f "$VIDFORGE_TIMINGS" ]; then wc -l <"$VIDFORGE_TIMINGS"; else echo 0; fi
}

timing_table() {
  [ -n "${VIDFORGE_TIMINGS:-}" ] && [ -f "$VIDFORGE_TIMINGS" ] || return 0
  python3 "$(dirname "${BASH_SOURCE[0]}")/timing_table.py" "$VIDFORGE_TIMINGS" "${1:-0}"
}
