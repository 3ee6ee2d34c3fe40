"""Prints the phase timings that scripts/lib/timing.sh collected (one "name<TAB>seconds<TAB>rc"
line each) as a table: wall time, share of the whole and status, in the order the phases ended.
An optional number skips that many rows first (the rows of an enclosing run). Rows whose name
starts with spaces are not added to the total: the test binaries of `cargo test` (printed before
that phase's own row) and work that ran beside other phases (marked ∥)."""
import sys


def main() -> None:
    path, skip = sys.argv[1], (int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().splitlines()[skip:]:
            parts = line.split("\t")
            if len(parts) == 3:
                rows.append((parts[0], float(parts[1]), parts[2]))
    if not rows:
        return
    total = sum(secs for name, secs, _ in rows if not name.startswith(" "))
    width = max(len(name) for name, _, _ in rows + [("total", 0, "")])
    print(f"{'phase':<{width}}  {'wall':>8}  {'share':>5}  status")
    for name, secs, rc in rows:
        share = "" if name.startswith(" ") or not total else f"{100 * secs / total:.0f}%"
        status = "ok" if rc == "0" else f"FAILED ({rc})"
        print(f"{name:<{width}}  {fmt(secs):>8}  {share:>5}  {status}")
    print(f"{'total':<{width}}  {fmt(total):>8}")


def fmt(secs: float) -> str:
    minutes, s = divmod(round(secs), 60)
    return f"{minutes}m{s:02d}s" if minutes else f"{secs:.1f}s"


if __name__ == "__main__":
    main()
