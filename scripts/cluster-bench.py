#!/usr/bin/env python3
"""Renders per hour of a vidforge cluster with 1, 2, 3... nodes on this machine.

For each node count: `scripts/cluster.sh up` (private PostgreSQL, N nodes, nginx on loopback),
one test clip uploaded through the gateway, R renders submitted at once through the gateway's
MCP endpoint (task path), every task polled through the gateway until it completes. Reports
wall time (first submit to last completion), renders/hour, median and p90 latency per render,
how many renders each node ran (from the node logs), and the ratio to one node. Then
`cluster.sh down --purge`.

    scripts/cluster-bench.py --nodes 1,2,3 --renders 8 --out docs/bench/cluster

Needs a release build (`make build`; VIDFORGE_BIN overrides the binary), the ffmpeg CLI,
PostgreSQL 15 and nginx (scripts/install-deps.sh). Everything listens on 127.0.0.1 only.
"""

import argparse
import json
import os
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
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


def cluster(args, state, *cmd, env=None):
    log = f"{state}.{cmd[0]}.log"
    with open(log, "w") as out:
        rc = subprocess.call(
            [os.path.join(ROOT, "scripts/cluster.sh"), *cmd],
            env={**os.environ, "VIDFORGE_CLUSTER_DIR": state, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if rc != 0:
        sys.exit(f"cluster.sh {' '.join(cmd)} failed:\n{open(log).read()}")


def run_one(args, nodes, clip, work):
    state = os.path.join(work, f"cluster-{nodes}")
    extra = f"--render-slots 1 --per-principal-concurrent {args.renders + 4} --queue-capacity {args.renders + 4}"
    cluster(
        args,
        state,
        "up",
        env={
            "VIDFORGE_NODES": str(nodes),
            "VIDFORGE_CLUSTER_PORT": str(free_port()),
            "VIDFORGE_CLUSTER_ARGS": extra,
            "VIDFORGE_BIN": args.bin,
            "RUST_LOG": "info",
        },
    )
    try:
        env = read_env(os.path.join(state, "cluster.env"))
        base, token = env["VIDFORGE_CLUSTER_URL"], env["VIDFORGE_CLUSTER_TOKEN"]
        gw = Mcp(f"{base}/mcp", token, "cluster-bench")
        uri = upload(base, token, clip)
        arguments = {
            "source_asset_uri": uri,
            "output_format": args.format,
            "resolution": args.resolution,
        }
        started = time.monotonic()
        created = {}
        for _ in range(args.renders):
            task = gw.call(
                "tools/call",
                {"name": "vidforge_render_video", "arguments": arguments},
                name="vidforge_render_video",
            )
            created[task["taskId"]] = time.monotonic()
        done = {}
        deadline = started + args.timeout
        while len(done) < len(created):
            if time.monotonic() > deadline:
                sys.exit(f"{nodes} nodes: {len(created) - len(done)} renders unfinished after {args.timeout} s")
            for tid in created:
                if tid in done:
                    continue
                status = gw.call("tasks/get", {"taskId": tid}, name=tid)["status"]
                if status == "completed":
                    done[tid] = time.monotonic()
                elif status in ("failed", "cancelled"):
                    sys.exit(f"render {tid} ended {status}")
            time.sleep(0.5)
        wall = max(done.values()) - started
        latencies = sorted(done[t] - created[t] for t in created)
        per_node = {}
        for i in range(1, nodes + 1):
            with open(env[f"NODE{i}_LOG"], errors="replace") as f:
                per_node[f"node{i}"] = sum(
                    1 for line in f if "render started" in line and re.search(r"task_\w+", line)
                )
        return {
            "nodes": nodes,
            "renders": args.renders,
            "wall_s": round(wall, 2),
            "renders_per_hour": round(args.renders / wall * 3600, 1),
            "latency_median_s": round(statistics.median(latencies), 2),
            "latency_p90_s": round(latencies[max(0, int(len(latencies) * 0.9 + 0.5) - 1)], 2),
            "renders_per_node": per_node,
        }
    finally:
        cluster(args, state, "down", "--purge")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1,2,3")
    p.add_argument("--renders", type=int, default=8)
    p.add_argument("--resolution", default="720p")
    p.add_argument("--format", default="mp4")
    p.add_argument("--clip-seconds", type=float, default=4)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per node count")
    p.add_argument("--out", default="cluster-bench")
    p.add_argument("--bin", default=os.environ.get("VIDFORGE_BIN", os.path.join(ROOT, "target/release/vidforge")))
    args = p.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"{args.bin} is missing: make build")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        os.chmod(work, 0o755)
        clip = os.path.join(work, "clip.mp4")
        subprocess.check_call(
            ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
             f"testsrc2=size=1280x720:rate=25:duration={args.clip_seconds}",
             "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", clip]
        )
        rows = []
        for n in [int(x) for x in args.nodes.split(",")]:
            row = run_one(args, n, clip, work)
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]
    lines = [
        "| nodes | renders | wall s | renders/hour | vs 1 node | median latency s | p90 latency s | renders per node |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        r["ratio_vs_first"] = round(r["renders_per_hour"] / base["renders_per_hour"], 2)
        r["overhead_s_per_render_vs_first"] = round((r["wall_s"] - base["wall_s"]) / r["renders"], 2)
        lines.append(
            f"| {r['nodes']} | {r['renders']} | {r['wall_s']} | {r['renders_per_hour']} | "
            f"{r['ratio_vs_first']:.2f} | {r['latency_median_s']} | {r['latency_p90_s']} | "
            + ", ".join(f"{k} {v}" for k, v in r["renders_per_node"].items())
            + " |"
        )
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "cluster-bench.json"), "w") as f:
        json.dump(
            {"args": {k: v for k, v in vars(args).items() if k != "out"}, "nproc": os.cpu_count(), "rows": rows},
            f,
            indent=2,
        )
    with open(os.path.join(args.out, "cluster-bench.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
