#!/usr/bin/env python3
"""Renders per hour of a vidforge cluster with 1, 2, 3... nodes on this machine.

For each node count: `scripts/cluster.sh up` (private PostgreSQL, N nodes with
`--render-slots 1`, nginx on loopback in front), one test clip (made once with the ffmpeg CLI:
testsrc2, 1280x720, 25 fps, --clip-seconds long) uploaded through the gateway, then --repeats
rounds of: R renders submitted at once through the gateway's MCP endpoint (task path),
every task polled through the gateway every 0.5 s until it completes. Then
`cluster.sh down --purge`.

Per round it records:
  - wall time, first submit to last completion seen by the client -> renders/hour = R/wall*3600
    (and the same span by the server's clocks: first `created_at` to last `finished_at`);
  - latency per render, created -> completed, from the render records in PostgreSQL
    (`doc->>'created_at'`, `doc->>'finished_at'`, Unix ms; the client's view beside it);
  - how many renders each node ran (its log's "render started" lines for this round's
    render ids) and how many attempts the renders took (`doc->>'attempts'`);
  - CPU seconds spent by the nodes, by PostgreSQL and by nginx during the round (/proc), so the
    coordination cost can be read as CPU and not only as wall time, and by everything else on
    the machine (`other`: this script, and noise such as someone's build; keep it small).
Per node count (median wall over the rounds): renders/hour, ratio to the first node count and
`(wall_N - wall_first) / R`, the wall-clock overhead per render of the extra nodes.

    scripts/cluster-bench.py --nodes 1,2,3 --renders 8 --repeats 1 --resolution 720p \\
        --format mp4 --clip-seconds 4 --out DIR

Writes DIR/cluster-bench.json (everything, per round and per render) and DIR/cluster-bench.md
(the table), and prints the table. Needs a release build (`make build`; --bin or VIDFORGE_BIN
names the binary: copy it away first if someone may rebuild it meanwhile), the ffmpeg CLI,
PostgreSQL 15 and nginx (scripts/install-deps.sh). Everything listens on 127.0.0.1 only; every
wait is bounded (--timeout per node count) and the cluster is taken down on any failure.
Python 3 standard library only.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from task_render import Mcp  # noqa: E402  (the project's one stdlib MCP client)

POLL_S = 0.5
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TICK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v.strip("'")
    return env


def upload(base, token, path):
    """`POST /assets` through the gateway; the asset's URI."""
    with open(path, "rb") as f:
        data = f.read()
    req = urllib.request.Request(
        f"{base}/assets?name={os.path.basename(path)}",
        data=data,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["uri"]


def cluster(state, *cmd, env=None):
    log = f"{state}.{cmd[0]}.log"
    with open(log, "w") as out:
        rc = subprocess.call(
            [os.path.join(ROOT, "scripts/cluster.sh"), *cmd],
            env={**os.environ, "VIDFORGE_CLUSTER_DIR": state, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=180,
        )
    if rc != 0:
        with open(log) as f:
            raise BenchError(f"cluster.sh {' '.join(cmd)} failed:\n{f.read()}")


def psql(env, sql):
    psql_bin = os.path.join(env.get("PG_BIN", ""), "psql")
    if not os.access(psql_bin, os.X_OK):
        psql_bin = "psql"
    out = subprocess.run(
        [psql_bin, env["PG_URL"], "-AtF", "\t", "-c", sql],
        capture_output=True, text=True, timeout=30,
    )
    if out.returncode != 0:
        raise BenchError(f"psql failed: {out.stderr.strip()}")
    return [line.split("\t") for line in out.stdout.splitlines() if line]


def proc_cpu(pid, children=False):
    """CPU seconds of PID (user + system; with `children`, also its reaped children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # After the command: state is fields[0]; utime, stime, cutime, cstime are fields[11..14].
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def child_pids(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def pid_from(path):
    try:
        with open(path) as f:
            return int(f.readline().strip())
    except (OSError, ValueError):
        return None


def cpu_snapshot(env, nodes):
    """CPU seconds so far of each node, of PostgreSQL (postmaster, its children and what it
    reaped) and of nginx (master and workers)."""
    snap = {}
    for i in range(1, nodes + 1):
        pid = pid_from(env[f"NODE{i}_PID_FILE"])
        snap[f"node{i}"] = proc_cpu(pid) if pid else 0.0
    for part, pid in (
        ("postgres", pid_from(os.path.join(env["PG_DATA"], "postmaster.pid"))),
        ("nginx", pid_from(env["NGINX_PID_FILE"])),
    ):
        snap[part] = (proc_cpu(pid, children=True) + sum(proc_cpu(c) for c in child_pids(pid))) if pid else 0.0
    return snap


def system_busy_cpu():
    """CPU seconds this machine has spent busy (all processes, all cores) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait.
    return (sum(v[:8]) - v[3] - v[4]) / TICK


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def started_by_node(env, nodes, ids):
    """node -> how many "render started" lines of these render ids its log has."""
    counts = {}
    for i in range(1, nodes + 1):
        n = 0
        with open(env[f"NODE{i}_LOG"], errors="replace") as f:
            for line in f:
                if "render started" not in line:
                    continue
                m = re.search(r"render_id=(task_\w+)", ANSI.sub("", line))
                if m and m.group(1) in ids:
                    n += 1
        counts[f"node{i}"] = n
    return counts


def one_round(args, env, gw, uri, nodes):
    arguments = {"source_asset_uri": uri, "output_format": args.format, "resolution": args.resolution}
    cpu_before = cpu_snapshot(env, nodes)
    busy_before = system_busy_cpu()
    started = time.monotonic()
    created = {}
    for _ in range(args.renders):
        task = gw.call("tools/call", {"name": "vidforge_render_video", "arguments": arguments},
                       name="vidforge_render_video")
        if "taskId" not in task:
            raise BenchError(f"tools/call answered no task: {task}")
        created[task["taskId"]] = time.monotonic()
    submit_s = time.monotonic() - started
    done = {}
    deadline = started + args.timeout
    while len(done) < len(created):
        if time.monotonic() > deadline:
            raise BenchError(f"{nodes} nodes: {len(created) - len(done)} of {len(created)} renders "
                             f"unfinished after {args.timeout} s")
        for tid in created:
            if tid in done:
                continue
            task = gw.call("tasks/get", {"taskId": tid}, name=tid)
            status = task.get("status")
            if status == "completed":
                done[tid] = time.monotonic()
            elif status in ("failed", "cancelled", "input_required"):
                raise BenchError(f"render {tid} is {status}: {json.dumps(task)[:2000]}")
        if len(done) < len(created):
            time.sleep(POLL_S)
    wall = max(done.values()) - started
    cpu_after = cpu_snapshot(env, nodes)
    busy = system_busy_cpu() - busy_before

    ids = list(created)
    rows = psql(env, "SELECT id, doc->>'created_at', doc->>'finished_at', doc->>'attempts', state "
                     "FROM renders WHERE id IN (" + ",".join(f"'{i}'" for i in ids) + ")")
    db = {r[0]: r for r in rows}
    missing = [i for i in ids if i not in db or not db[i][2]]
    if missing:
        raise BenchError(f"renders without a finished_at in PostgreSQL: {missing}")
    server_lat = [(int(db[i][2]) - int(db[i][1])) / 1000 for i in ids]
    client_lat = [done[i] - created[i] for i in ids]
    server_wall = (max(int(db[i][2]) for i in ids) - min(int(db[i][1]) for i in ids)) / 1000
    per_node = started_by_node(env, nodes, set(ids))
    attempts = sum(int(db[i][3] or 0) for i in ids)
    if sum(per_node.values()) != attempts:
        print(f"warning: node logs show {sum(per_node.values())} render starts, PostgreSQL "
              f"{attempts} attempts", file=sys.stderr)
    cpu = {k: round(cpu_after[k] - cpu_before[k], 2) for k in cpu_after}
    # Everything else that ran meanwhile (this script, psql, other users' builds): noise.
    cpu["other"] = round(max(0.0, busy - sum(cpu.values())), 2)
    return {
        "nodes": nodes,
        "renders": args.renders,
        "submit_s": round(submit_s, 3),
        "wall_s": round(wall, 2),
        "server_wall_s": round(server_wall, 2),
        "renders_per_hour": round(args.renders / wall * 3600, 1),
        "latency_median_s": round(statistics.median(server_lat), 2),
        "latency_p90_s": round(percentile(server_lat, 90), 2),
        "client_latency_median_s": round(statistics.median(client_lat), 2),
        "client_latency_p90_s": round(percentile(client_lat, 90), 2),
        "renders_per_node": per_node,
        "attempts": attempts,
        "cpu_s": cpu,
        "per_render": [
            {"id": i, "latency_s": round(s, 3), "client_latency_s": round(c, 3),
             "attempts": int(db[i][3] or 0)}
            for i, s, c in zip(ids, server_lat, client_lat)
        ],
    }


def run_nodes(args, nodes, clip, work):
    state = os.path.join(work, f"cluster-{nodes}")
    up_env = {
        "VIDFORGE_NODES": str(nodes),
        "VIDFORGE_CLUSTER_PORT": str(args.port or free_port()),
        "VIDFORGE_CLUSTER_ARGS": args.cluster_args,
        "VIDFORGE_BIN": args.bin,
        "RUST_LOG": "info",
    }
    try:
        cluster(state, "up", env=up_env)
        env = read_env(os.path.join(state, "cluster.env"))
        base, token = env["VIDFORGE_CLUSTER_URL"], env["VIDFORGE_CLUSTER_TOKEN"]
        gw = Mcp(f"{base}/mcp", token, "cluster-bench")
        uri = upload(base, token, clip)
        rounds = []
        for rep in range(args.repeats):
            r = one_round(args, env, gw, uri, nodes)
            r["repeat"] = rep + 1
            rounds.append(r)
            print(f"  {nodes} node(s), round {rep + 1}: {r['wall_s']} s, {r['renders_per_hour']} "
                  f"renders/hour, per node {r['renders_per_node']}, CPU s {r['cpu_s']}", flush=True)
        return rounds
    finally:
        if os.path.exists(state):
            try:
                cluster(state, "down", "--purge")
            except (BenchError, subprocess.TimeoutExpired) as e:
                print(f"warning: {e}", file=sys.stderr)


def summarize(nodes, rounds):
    """One row per node count: the round with the median wall time, latencies pooled."""
    walls = sorted(r["wall_s"] for r in rounds)
    wall = statistics.median(walls)
    renders = rounds[0]["renders"]
    lat = [p["latency_s"] for r in rounds for p in r["per_render"]]
    per_node = {}
    for r in rounds:
        for k, v in r["renders_per_node"].items():
            per_node[k] = per_node.get(k, 0) + v
    cpu = {}
    for r in rounds:
        for k, v in r["cpu_s"].items():
            cpu[k] = cpu.get(k, 0) + v
    n = renders * len(rounds)
    return {
        "nodes": nodes,
        "renders": renders,
        "repeats": len(rounds),
        "wall_s": round(wall, 2),
        "wall_s_all": walls,
        "renders_per_hour": round(renders / wall * 3600, 1),
        "latency_median_s": round(statistics.median(lat), 2),
        "latency_p90_s": round(percentile(lat, 90), 2),
        "renders_per_node": per_node,
        "node_cpu_s_per_render": round(sum(v for k, v in cpu.items() if k.startswith("node")) / n, 3),
        "postgres_cpu_s_per_render": round(cpu.get("postgres", 0) / n, 3),
        "nginx_cpu_s_per_render": round(cpu.get("nginx", 0) / n, 3),
        "other_cpu_s": round(cpu.get("other", 0), 2),
        "cpu_busy_share": round(sum(cpu.values()) / (sum(r["wall_s"] for r in rounds) * (os.cpu_count() or 1)), 2),
    }


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def table(rows):
    lines = [
        "| nodes | renders | wall s | renders/hour | vs 1st | overhead s/render | median latency s "
        "| p90 latency s | renders per node | CPU s/render: nodes, PostgreSQL, nginx | machine busy | other CPU s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['nodes']} | {r['renders']}"
            + (f" x{r['repeats']}" if r["repeats"] > 1 else "")
            + f" | {r['wall_s']} | {r['renders_per_hour']} | {r['ratio_vs_first']:.2f} "
            f"| {r['overhead_s_per_render_vs_first']:+.2f} | {r['latency_median_s']} | {r['latency_p90_s']} | "
            + ", ".join(f"{k} {v}" for k, v in r["renders_per_node"].items())
            + f" | {r['node_cpu_s_per_render']}, {r['postgres_cpu_s_per_render']}, {r['nginx_cpu_s_per_render']} "
            f"| {r['cpu_busy_share']:.0%} | {r['other_cpu_s']} |"
        )
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1,2,3", help="node counts, comma-separated (default 1,2,3)")
    p.add_argument("--renders", type=int, default=8, help="renders submitted at once per round")
    p.add_argument("--repeats", type=int, default=1, help="rounds per node count (same cluster)")
    p.add_argument("--resolution", default="720p")
    p.add_argument("--format", default="mp4")
    p.add_argument("--clip-seconds", type=float, default=4)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per node count and round")
    p.add_argument("--port", type=int, default=0, help="gateway port (default: a free one)")
    p.add_argument("--cluster-args", default=None,
                   help="extra `vidforge serve` flags for every node (default: --render-slots 1 and "
                        "per-principal/queue limits above --renders)")
    p.add_argument("--out", default="cluster-bench")
    p.add_argument("--bin", default=os.environ.get("VIDFORGE_BIN", os.path.join(ROOT, "target/release/vidforge")))
    args = p.parse_args()
    if args.renders < 1 or args.repeats < 1:
        sys.exit("--renders and --repeats must be at least 1")
    if args.cluster_args is None:
        limit = max(64, args.renders + 4)
        args.cluster_args = f"--render-slots 1 --per-principal-concurrent {limit} --queue-capacity {limit}"
    args.bin = os.path.abspath(args.bin)
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"{args.bin} is missing: make build")
    node_counts = [int(x) for x in args.nodes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    info = machine()
    rounds = []
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="cluster-bench-") as work:
            os.chmod(work, 0o755)
            clip = os.path.join(work, "clip.mp4")
            subprocess.check_call(
                ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                 f"testsrc2=size=1280x720:rate=25:duration={args.clip_seconds}",
                 "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", clip],
                timeout=300,
            )
            for n in node_counts:
                print(f"{n} node(s): starting the cluster", flush=True)
                got = run_nodes(args, n, clip, work)
                rounds.extend(got)
                rows.append(summarize(n, got))
    except (BenchError, subprocess.SubprocessError, OSError) as e:
        sys.exit(f"cluster-bench: FAIL: {e}")
    base = rows[0]
    for r in rows:
        r["ratio_vs_first"] = round(r["renders_per_hour"] / base["renders_per_hour"], 2)
        r["overhead_s_per_render_vs_first"] = round((r["wall_s"] - base["wall_s"]) / r["renders"], 2)
    text = table(rows)
    print(text)
    with open(os.path.join(args.out, "cluster-bench.json"), "w") as f:
        json.dump(
            {"args": {k: v for k, v in vars(args).items() if k != "out"}, "machine": info,
             "nproc": info["nproc"], "rows": rows, "rounds": rounds},
            f,
            indent=2,
        )
        f.write("\n")
    with open(os.path.join(args.out, "cluster-bench.md"), "w") as f:
        f.write(
            f"{info['date_utc']}, {info['nproc']} x {info['cpu_model']}: {args.renders} renders x "
            f"{args.repeats} round(s) per node count, {args.resolution} {args.format} from a "
            f"{args.clip_seconds:g} s 1280x720 clip; node flags `{args.cluster_args}`.\n"
            "Wall: first submit to last completion (median over rounds). Latency: created -> "
            "finished (PostgreSQL). Overhead: (wall_N - wall_first) / renders. Machine busy: "
            "busy CPU time of the whole machine / (wall x cores). Other CPU s: busy CPU time not "
            "spent by the nodes, PostgreSQL or nginx (this script, anything else running).\n\n"
        )
        f.write(text + "\n")


if __name__ == "__main__":
    main()
