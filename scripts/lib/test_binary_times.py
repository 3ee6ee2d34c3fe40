"""Passes `cargo test` output through unchanged and, at its end, appends the wall time of each
test binary (from one "Running ..." / "Doc-tests ..." line to the next) to the timings file
named by argv[1], in scripts/lib/timing.sh's format, as indented rows of the phase that follows
them. Usage: cargo test ... 2>&1 | python3 test_binary_times.py FILE"""
import re
import sys
import time

RUNNING = re.compile(r"^\s+Running (?:unittests )?(\S+) \((?:.*/)?([^/)]+?)(?:-[0-9a-f]{16})?\)")
DOCTESTS = re.compile(r"^\s+Doc-tests (\S+)")


def main() -> None:
    rows, current, started = [], None, 0.0
    passed = re.compile(r"^test result: (\w+)")
    status = "0"
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        m = RUNNING.match(line)
        d = DOCTESTS.match(line)
        if m or d:
            now = time.monotonic()
            if current:
                rows.append((current, now - started, status))
            current = f"{m.group(2)} ({m.group(1)})" if m else f"doc-tests {d.group(1)}"
            started, status = now, "0"
            continue
        r = passed.match(line)
        if r and r.group(1) != "ok":
            status = "1"
    if current:
        rows.append((current, time.monotonic() - started, status))
    if len(sys.argv) > 1 and sys.argv[1]:
        with open(sys.argv[1], "a", encoding="utf-8") as f:
            for name, secs, rc in rows:
                f.write(f"    {name}\t{secs:.1f}\t{rc}\n")


if __name__ == "__main__":
    main()
