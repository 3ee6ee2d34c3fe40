#!/usr/bin/env python3
"""Segment-parallel rendering (issue #41): one long watermarked render on 1, 2 and 3 nodes.

Nodes pinned to their own cores with `taskset` stand in for machines (`scripts/cluster.sh`
with VIDFORGE_CLUSTER_CPUS): 1 node on one core, 2 nodes on one core each, 3 nodes sharing
the cores of --cpus (default: every CPU this process may use). Every node runs
`--render-slots 1 --speculative off --backend cpu` and the segment flags below. The scenario:

  - one source made once with the ffmpeg CLI: testsrc2 1920x1080, 25 fps, H.264 with an IDR
    every 2 s (-g 50, no scene cuts), a continuous 440 Hz sine tone (AAC), --source-seconds
    long; and a PNG logo;
  - per scenario a fresh cluster (private PostgreSQL, N nodes, nginx on loopback), the source
    and the logo uploaded through the gateway;
  - per repeat: `vidforge_render_video` (1080p mp4, the logo bottom right at opacity 0.8) over
    the gateway's MCP endpoint (task path); the render stops for approval (speculation is
    off, so nothing renders ahead); once the task is input_required it is approved at once
    with the MCP tool `vidforge_approve_watermark`; the time to result runs from that approval
    to the completed task (the render record's decided_at -> finished_at in PostgreSQL, the
    client's own clock beside it); the output is downloaded.

The scenarios, side by side in one run: `single-pass` (1 node, --fanout off: the reference)
and then each of --nodes with --fanout auto. Per scenario (median over --repeats):

  - time to result, its ratio to the 1-node fanout row and to the single-pass row;
  - segments, and which node rendered them (the `segment rendered` log lines: render_id,
    segment, of, frames, elapsed_ms, node);
  - join time: the `segments joined` log line's join_ms (else the change of the
    vidforge_segment_join_seconds histogram), and its share of the time to result;
  - coordination overhead per segment = (nodes x render-phase wall - sum of the segments'
    elapsed_ms) / segments, the render phase running from the `render split into segments`
    line to the last `segment rendered` line of the render (log timestamps);
  - the metrics' view: vidforge_renders_split_total and vidforge_segments_total{end=...}
    summed over the nodes (before/after each repeat), CPU seconds of the nodes, PostgreSQL,
    nginx and the rest of the machine during the render;
  - seam checks on the downloaded output: exact frame count (ffprobe -count_packets), video
    and audio durations within one frame of the source's, A/V offset at start and at end
    within one frame, no silence of 5 ms or more (silencedetect=n=-50dB:d=0.005), and PSNR
    against the single-pass output (ffmpeg's psnr filter: average, and the worst frame, which
    must stay at or above --min-psnr). The same checks run on the source and the single-pass
    output as controls.

It measures and states the targets (2 single-core nodes <= 0.6x the time of one; join < 5 %
of the render) against the measurements; it asserts no timing. It exits 1 when a render fails,
a split does not happen where it should, or a seam check fails (after writing the report).

    scripts/segment-bench.py --nodes 1,2,3 --repeats 1 --out docs/bench/segments

Writes DIR/segment-bench.json (everything, per repeat, with the render's log lines) and
DIR/segment-bench.md (the table), and prints the table. Needs a release build (--bin or
VIDFORGE_BIN; copy it away first if someone may rebuild it meanwhile), ffmpeg and ffprobe,
taskset, PostgreSQL 15 and nginx (scripts/install-deps.sh). Everything listens on 127.0.0.1;
every wait is bounded and the cluster is taken down on any failure. Python 3 standard library
only; the cluster, upload, psql and CPU helpers are scripts/cluster-bench.py's.
"""

import argparse
import datetime
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from task_render import Mcp  # noqa: E402  (the project's one stdlib MCP client)


def _cluster_bench():
    """scripts/cluster-bench.py as a module (its name is no identifier): its helpers, reused."""
    spec = importlib.util.spec_from_file_location("cluster_bench", os.path.join(ROOT, "scripts", "cluster-bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cb = _cluster_bench()
BenchError = cb.BenchError

POLL_S = 0.2
FFMPEG = ["ffmpeg", "-hide_banner", "-nostdin", "-y"]
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z\s+([A-Z]+)\s+(.*)$")
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
METRIC = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SPLIT_MSG = "render split into segments"
SEGMENT_MSG = "segment rendered"
JOINED_MSG = "segments joined"


# ------------------------------------------------------------------------------------ media


def run_tool(cmd, timeout):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise BenchError(f"{' '.join(cmd[:6])} ... failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return out


def make_fixtures(work, seconds):
    """The source (H.264 + AAC sine, IDR every 2 s) and the logo, made with the ffmpeg CLI."""
    src = os.path.join(work, "source.mp4")
    logo = os.path.join(work, "logo.png")
    run_tool(FFMPEG + [
        "-loglevel", "error",
        "-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate=25:duration={seconds}",
        "-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={seconds}",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-g", "50", "-keyint_min", "50", "-sc_threshold", "0",
        "-c:a", "aac", "-b:a", "128k", "-t", str(seconds), src], timeout=900)
    run_tool(FFMPEG + [
        "-loglevel", "error", "-f", "lavfi", "-i", "color=c=white@0.7:s=320x120,format=rgba",
        "-frames:v", "1", logo], timeout=60)
    return src, logo


def probe(path):
    """Frames (counted packets), frame rate and per-stream start and duration, in seconds."""
    out = run_tool(["ffprobe", "-v", "error", "-count_packets", "-show_entries",
                    "stream=codec_type,codec_name,width,height,r_frame_rate,start_time,duration,"
                    "nb_read_packets:format=duration", "-of", "json", path], timeout=300)
    info = json.loads(out.stdout)
    streams = {s["codec_type"]: s for s in info.get("streams", []) if s.get("codec_type") in ("video", "audio")}
    if "video" not in streams or "audio" not in streams:
        raise BenchError(f"{path}: expected a video and an audio stream, ffprobe saw {info.get('streams')}")
    v, a = streams["video"], streams["audio"]
    num, den = (int(x) for x in v["r_frame_rate"].split("/"))
    return {
        "video_codec": v.get("codec_name"),
        "audio_codec": a.get("codec_name"),
        "width": v.get("width"),
        "height": v.get("height"),
        "fps": num / den,
        "frames": int(v.get("nb_read_packets", 0)),
        "video_start_s": float(v.get("start_time", 0)),
        "video_duration_s": float(v.get("duration", 0)),
        "audio_start_s": float(a.get("start_time", 0)),
        "audio_duration_s": float(a.get("duration", 0)),
        "format_duration_s": float(info.get("format", {}).get("duration", 0)),
    }


def keyframe_times(path):
    out = run_tool(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                    "packet=pts_time,flags", "-of", "csv=p=0", path], timeout=300)
    times = []
    for line in out.stdout.splitlines():
        parts = line.split(",")
        if len(parts) >= 2 and "K" in parts[1]:
            times.append(round(float(parts[0]), 3))
    return sorted(times)


def silences(path, end_s):
    """(start, duration) of every stretch of 5 ms or more below -50 dB in the audio up to END_S,
    the end the stream declares (the decoder also yields the last AAC frame's padding, which an
    edit list cuts off in a player: not a gap)."""
    out = run_tool(FFMPEG + ["-nostats", "-i", path, "-vn", "-af",
                             f"atrim=end={end_s:.6f},silencedetect=n=-50dB:d=0.005", "-f", "null", "-"],
                   timeout=600)
    found = []
    start = None
    for line in out.stderr.splitlines():
        m = re.search(r"silence_start: (-?[\d.]+)", line)
        if m:
            start = float(m.group(1))
        m = re.search(r"silence_end: (-?[\d.]+) \| silence_duration: ([\d.]+)", line)
        if m:
            found.append((start, float(m.group(2))))
            start = None
    if start is not None:  # silent to the end: no silence_end line
        found.append((start, None))
    return found


def psnr(path, ref, stats_file):
    """PSNR of PATH's video against REF's: average over the frames and the worst frame."""
    out = run_tool(FFMPEG + ["-nostats", "-i", path, "-i", ref, "-lavfi",
                             f"[0:v][1:v]psnr=stats_file={stats_file}", "-f", "null", "-"],
                   timeout=1200)
    m = re.search(r"PSNR .*average:(\S+)", out.stderr)
    average = num(m.group(1)) if m else None
    worst = (float("inf"), None)
    frames = 0
    with open(stats_file) as f:
        for line in f:
            fields = dict(kv.split(":", 1) for kv in line.split() if ":" in kv)
            frames += 1
            value = float(fields.get("psnr_avg", "inf"))
            if value < worst[0]:
                worst = (value, int(fields.get("n", 0)))
    if worst[1] is None:  # every frame identical (inf): no number to report
        return {"identical": True, "average_db": None, "worst_db": None, "worst_frame": None, "frames": frames}
    if average is not None and average == float("inf"):
        average = None
    return {"identical": False, "average_db": average, "worst_db": worst[0], "worst_frame": worst[1],
            "frames": frames}


def seam_checks(path, source, ref, work, min_psnr):
    """The output's frames, durations, A/V offsets, silences and PSNR against REF."""
    got = probe(path)
    frame = 1 / source["fps"]
    start_offset = got["audio_start_s"] - got["video_start_s"]
    end_offset = (got["audio_start_s"] + got["audio_duration_s"]) - (got["video_start_s"] + got["video_duration_s"])
    quiet = silences(path, got["audio_start_s"] + got["audio_duration_s"])
    checks = {
        "frames": {"got": got["frames"], "want": source["frames"], "ok": got["frames"] == source["frames"]},
        "video_duration_s": {"got": got["video_duration_s"], "want": source["video_duration_s"],
                             "ok": abs(got["video_duration_s"] - source["video_duration_s"]) <= frame + 1e-6},
        "audio_duration_s": {"got": got["audio_duration_s"], "want": source["audio_duration_s"],
                             "ok": abs(got["audio_duration_s"] - source["audio_duration_s"]) <= frame + 1e-6},
        "av_start_offset_ms": {"got": round(start_offset * 1000, 2), "ok": abs(start_offset) <= frame + 1e-6},
        "av_end_offset_ms": {"got": round(end_offset * 1000, 2), "ok": abs(end_offset) <= frame + 1e-6},
        "silences_5ms": {"got": quiet[:20], "count": len(quiet), "ok": not quiet},
    }
    if ref is not None:
        p = psnr(path, ref, os.path.join(work, os.path.basename(path) + ".psnr.log"))
        p["ok"] = p["identical"] or p["worst_db"] >= min_psnr
        checks["psnr"] = p
    return {"probe": got, "checks": checks, "ok": all(c["ok"] for c in checks.values())}


# ------------------------------------------------------------------------------------ server


def parse_log(path, node):
    """Every line of a node's log as (unix s, level, text, fields, node)."""
    events = []
    with open(path, errors="replace") as f:
        for raw in f:
            line = cb.ANSI.sub("", raw.rstrip("\n"))
            m = LOG_LINE.match(line)
            if not m:
                continue
            stamp = m.group(1)[:26]
            fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in stamp else "%Y-%m-%dT%H:%M:%S"
            ts = datetime.datetime.strptime(stamp, fmt).replace(tzinfo=datetime.timezone.utc).timestamp()
            # A span's last field ends with `}` or `}:`.
            fields = {k: v.rstrip(":").rstrip("}").strip('"') for k, v in FIELD.findall(m.group(3))}
            events.append({"ts": ts, "level": m.group(2), "text": m.group(3), "fields": fields, "node": node})
    return events


def num(value, default=None):
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def render_events(env, nodes, render_id, since, until):
    """What the nodes' logs say about one render between SINCE and UNTIL (unix s)."""
    events = []
    for i in range(1, nodes + 1):
        events.extend(parse_log(env[f"NODE{i}_LOG"], f"node{i}"))
    events.sort(key=lambda e: e["ts"])
    window = [e for e in events if since - 1 <= e["ts"] <= until + 1]
    mine = [e for e in window if e["fields"].get("render_id") == render_id or render_id in e["text"]]
    # The service's lines carry a render_id field (the media crate logs its own `segment
    # rendered` and `segments joined` lines too, naming only files: not counted).
    named = [e for e in mine if e["fields"].get("render_id") == render_id]
    split = [e for e in named if SPLIT_MSG in e["text"]]
    segments = [e for e in named if SEGMENT_MSG in e["text"]]
    # The join line names the render's output file, and join_ms.
    joined = [e for e in mine if JOINED_MSG in e["text"] and "join_ms" in e["fields"]]
    if not joined and split:
        # Else the coordinator's first one after the split.
        joined = [e for e in window if JOINED_MSG in e["text"] and "join_ms" in e["fields"]
                  and e["node"] == split[0]["node"] and e["ts"] >= split[0]["ts"]][:1]
    seen = {id(e) for e in mine + joined}
    trouble = [e for e in window if e["level"] in ("WARN", "ERROR") and id(e) not in seen]
    shown = {id(e): e for e in mine + joined + trouble}
    return {
        "split": split,
        "segments": segments,
        "joined": joined,
        "excerpt": [f"{datetime.datetime.fromtimestamp(e['ts'], datetime.timezone.utc).strftime('%H:%M:%S.%f')[:-3]} "
                    f"{e['node']} {e['level']} {e['text']}" for e in sorted(shown.values(), key=lambda e: e["ts"])][:300],
    }


def scrape(env, nodes):
    """Every node's /metrics (loopback, the gateway's Host), summed: {(name, labels): value}."""
    total = {}
    host = f"127.0.0.1:{env['VIDFORGE_CLUSTER_PORT']}"
    for i in range(1, nodes + 1):
        req = urllib.request.Request(f"{env[f'NODE{i}_URL']}/metrics", headers={"Host": host})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read().decode()
        except OSError as e:
            raise BenchError(f"GET node{i}/metrics: {e}")
        for line in text.splitlines():
            m = METRIC.match(line)
            if not m or line.startswith("#"):
                continue
            labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
            key = (m.group(1), labels)
            total[key] = total.get(key, 0.0) + (num(m.group(3), 0.0))
    return total


def metric(snapshot, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in snapshot.items() if n == name and want <= set(ls))


def metric_deltas(before, after):
    d = {name: metric(after, name) - metric(before, name)
         for name in ("vidforge_renders_split_total", "vidforge_segment_join_seconds_sum",
                      "vidforge_segment_join_seconds_count")}
    for end in ("done", "failed", "stopped"):
        d[f"vidforge_segments_total{{end={end}}}"] = (metric(after, "vidforge_segments_total", end=end)
                                                      - metric(before, "vidforge_segments_total", end=end))
    return {k: round(v, 4) for k, v in d.items()}


def call(gw, method, params, name):
    """Mcp.call, whose protocol errors exit the process (task_render.fail), as a BenchError."""
    try:
        return gw.call(method, params, name=name)
    except SystemExit as e:
        raise BenchError(f"{method} {name}: the MCP client gave up (exit {e.code}; its reason is on stderr)")


def wait_status(gw, task_id, want, timeout):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        task = call(gw, "tasks/get", {"taskId": task_id}, task_id)
        status = task.get("status")
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == want:
            return task, time.monotonic()
        if status in ("completed", "failed", "cancelled") or (status == "input_required" and want != status):
            raise BenchError(f"render {task_id} is {status} while waiting for {want} "
                             f"(seen {' -> '.join(seen)}): {json.dumps(task)[:3000]}")
        if time.monotonic() > deadline:
            raise BenchError(f"render {task_id} still {status} after {timeout} s waiting for {want}")
        time.sleep(POLL_S)


def download(task, token, out):
    result = task.get("result") or {}
    if result.get("isError"):
        raise BenchError(f"the render completed with an error: {json.dumps(result)[:3000]}")
    links = [c for c in result.get("content", []) if c.get("type") == "resource_link"]
    url = links[0].get("_meta", {}).get("com.vidforge/download_url") if links else None
    if not url:
        raise BenchError(f"no download URL in the result: {json.dumps(result)[:2000]}")
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=300) as resp, open(out, "wb") as f:
        while chunk := resp.read(1 << 20):
            f.write(chunk)


def one_render(args, sc, env, gw, token, uris, rep, work):
    """One watermarked render, approved at once; its timings, log lines and metrics."""
    nodes = sc["nodes"]
    arguments = {"source_asset_uri": uris["source"], "output_format": "mp4", "resolution": "1080p",
                 "watermark": {"image_asset_uri": uris["logo"], "position": "bottom_right", "opacity": 0.8}}
    created_at = time.time()
    created = call(gw, "tools/call", {"name": "vidforge_render_video", "arguments": arguments},
                   "vidforge_render_video")
    render_id = created.get("taskId")
    if not render_id:
        raise BenchError(f"tools/call answered no task: {created}")
    wait_status(gw, render_id, "input_required", args.timeout)
    metrics_before = scrape(env, nodes)
    cpu_before = cb.cpu_snapshot(env, nodes)
    busy_before = cb.system_busy_cpu()
    approved_at = time.time()
    t0 = time.monotonic()
    answer = call(gw, "tools/call", {"name": "vidforge_approve_watermark",
                                     "arguments": {"render_id": render_id, "approved": True}},
                  "vidforge_approve_watermark")
    if answer.get("isError"):
        raise BenchError(f"vidforge_approve_watermark answered an error: {json.dumps(answer)[:2000]}")
    record = {"render_id": render_id, "repeat": rep, "created_at_unix": round(created_at, 3),
              "approved_at_unix": round(approved_at, 3)}
    try:
        task, t1 = wait_status(gw, render_id, "completed", args.timeout)
    except BenchError as e:
        # What the logs say goes with the failure.
        record.update(log_view(env, nodes, render_id, created_at, approved_at, time.time() + 60))
        record["metrics"] = metric_deltas(metrics_before, scrape(env, nodes))
        e.record = record
        raise
    finished_at = time.time()
    record["client_time_to_result_s"] = round(t1 - t0, 3)
    cpu_after = cb.cpu_snapshot(env, nodes)
    busy = cb.system_busy_cpu() - busy_before
    cpu = {k: round(cpu_after[k] - cpu_before[k], 2) for k in cpu_after}
    cpu["other"] = round(max(0.0, busy - sum(cpu.values())), 2)
    record["cpu_s"] = cpu
    record["metrics"] = metric_deltas(metrics_before, scrape(env, nodes))
    rows = cb.psql(env, "SELECT doc->'approval'->'decision'->>'decided_at', doc->>'finished_at', "
                        f"doc->>'attempts', state FROM renders WHERE id = '{render_id}'")
    if not rows or not rows[0][1]:
        raise BenchError(f"render {render_id}: no finished_at in PostgreSQL ({rows})")
    decided, finished, attempts, state = rows[0]
    record["attempts"] = int(attempts or 0)
    record["state"] = state
    record["time_to_result_s"] = round((int(finished) - int(decided)) / 1000, 3) if decided else record["client_time_to_result_s"]
    # The log view again, now that the render is done (lines written after the poll saw it).
    record.update(log_view(env, nodes, render_id, created_at, approved_at, finished_at + 1))
    out = os.path.join(work, f"{sc['key']}-{rep}.mp4")
    download(task, token, out)
    record["output"] = out
    record["output_bytes"] = os.path.getsize(out)
    return record


def log_view(env, nodes, render_id, since, approved_at, until):
    ev = render_events(env, nodes, render_id, since, until)
    segs = [{"segment": e["fields"].get("segment"), "of": e["fields"].get("of"),
             "frames": num(e["fields"].get("frames")), "elapsed_ms": num(e["fields"].get("elapsed_ms")),
             "node": e["fields"].get("node") or e["node"], "log": e["node"], "ts": round(e["ts"], 3)}
            for e in ev["segments"]]
    per_node = {}
    for s in segs:
        per_node[s["node"]] = per_node.get(s["node"], 0) + 1
    view = {"segments": len(segs), "segments_per_node": dict(sorted(per_node.items())), "segment_lines": segs,
            "split_lines": len(ev["split"]), "log_excerpt": ev["excerpt"]}
    if ev["split"]:
        first = ev["split"][0]
        view["coordinator"] = first["node"]
        view["split_segments"] = num(first["fields"].get("segments"))
    if ev["joined"]:
        view["join_ms"] = num(ev["joined"][0]["fields"].get("join_ms"))
    if ev["split"] and segs:
        # From the split (or the approval, should the plan come with the preview) to the last
        # segment.
        phase_ms = (max(s["ts"] for s in segs) - max(ev["split"][0]["ts"], approved_at)) * 1000
        view["render_phase_ms"] = round(phase_ms, 1)
        elapsed = sum(s["elapsed_ms"] or 0 for s in segs)
        view["segment_elapsed_ms_sum"] = round(elapsed, 1)
        view["segment_frames_sum"] = sum(s["frames"] or 0 for s in segs)
    return view


def run_scenario(args, sc, fixtures, source_info, ref_output, work):
    state = os.path.join(work, f"cluster-{sc['key']}")
    node_args = (f"--render-slots 1 --speculative off --backend cpu --fanout {sc['fanout']} "
                 f"--segment-seconds {args.segment_seconds} --segment-min-duration {args.segment_min_duration}"
                 + (f" {args.node_args}" if args.node_args else ""))
    sc["node_args"] = node_args
    up_env = {
        "VIDFORGE_NODES": str(sc["nodes"]),
        "VIDFORGE_CLUSTER_PORT": str(cb.free_port()),
        "VIDFORGE_CLUSTER_ARGS": node_args,
        "VIDFORGE_CLUSTER_CPUS": sc["cpus"],
        "VIDFORGE_BIN": args.bin,
        "RUST_LOG": "info",
    }
    repeats = []
    try:
        cb.cluster(state, "up", env=up_env)
        env = cb.read_env(os.path.join(state, "cluster.env"))
        base, token = env["VIDFORGE_CLUSTER_URL"], env["VIDFORGE_CLUSTER_TOKEN"]
        gw = Mcp(f"{base}/mcp", token, "segment-bench")
        uris = {"source": cb.upload(base, token, fixtures["source"]), "logo": cb.upload(base, token, fixtures["logo"])}
        for rep in range(1, args.repeats + 1):
            try:
                r = one_render(args, sc, env, gw, token, uris, rep, work)
            except (BenchError, OSError, subprocess.SubprocessError) as e:
                repeats.append({**getattr(e, "record", {}), "repeat": rep, "error": str(e)})
                print(f"  {sc['name']}, repeat {rep}: FAILED: {e}", flush=True)
                for line in getattr(e, "record", {}).get("log_excerpt", [])[-40:]:
                    print(f"    | {line}", flush=True)
                break
            ref = ref_output if sc["fanout"] != "off" else None
            r["seams"] = seam_checks(r["output"], source_info, ref, work, args.min_psnr)
            if sc["fanout"] != "off" and sc["expect_split"] and not r.get("split_lines"):
                r["error"] = "no split: no `render split into segments` line for the render"
            repeats.append(r)
            print(f"  {sc['name']}, repeat {rep}: {r['time_to_result_s']} s to result, "
                  f"{r['segments']} segments {r['segments_per_node']}, join {r.get('join_ms')} ms, "
                  f"seams {'ok' if r['seams']['ok'] else 'FAILED'}, CPU s {r['cpu_s']}", flush=True)
    except (BenchError, OSError, subprocess.SubprocessError) as e:
        repeats.append({"error": str(e)})
        print(f"  {sc['name']}: FAILED: {e}", flush=True)
    finally:
        if os.path.exists(state):
            try:
                cb.cluster(state, "down", "--purge")
            except (BenchError, subprocess.TimeoutExpired) as e:
                print(f"warning: {e}", file=sys.stderr)
    return repeats


# ------------------------------------------------------------------------------------ report


def median_of(repeats, key):
    values = [r[key] for r in repeats if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def summarize(sc, repeats):
    good = [r for r in repeats if "time_to_result_s" in r]
    row = {k: sc[k] for k in ("name", "key", "nodes", "fanout", "cpus", "node_args")}
    row["repeats"] = len(good)
    row["errors"] = [r["error"] for r in repeats if r.get("error")]
    if not good:
        return row
    row["time_to_result_s"] = median_of(good, "time_to_result_s")
    row["time_to_result_s_all"] = [r["time_to_result_s"] for r in good]
    row["client_time_to_result_s"] = median_of(good, "client_time_to_result_s")
    row["segments"] = median_of(good, "segments")
    row["segments_per_node"] = good[0]["segments_per_node"]
    for r in good:  # the join time: the log line, else the histogram's change
        if r.get("join_ms") is None and r["metrics"].get("vidforge_segment_join_seconds_count"):
            m = r["metrics"]
            r["join_ms"] = round(1000 * m["vidforge_segment_join_seconds_sum"] / m["vidforge_segment_join_seconds_count"], 1)
        if r.get("join_ms") is not None:
            r["join_share"] = round(r["join_ms"] / 1000 / r["time_to_result_s"], 4)
        if r.get("render_phase_ms") is not None and r.get("segments"):
            r["overhead_ms_per_segment"] = round(
                (sc["nodes"] * r["render_phase_ms"] - r["segment_elapsed_ms_sum"]) / r["segments"], 1)
    row["join_ms"] = median_of(good, "join_ms")
    row["join_share"] = median_of(good, "join_share")
    row["render_phase_ms"] = median_of(good, "render_phase_ms")
    row["overhead_ms_per_segment"] = median_of(good, "overhead_ms_per_segment")
    row["metrics"] = good[0]["metrics"]
    row["cpu_s"] = good[0]["cpu_s"]
    row["seams_ok"] = all(r["seams"]["ok"] for r in good)
    checks = [r["seams"]["checks"] for r in good]
    row["frames"] = [c["frames"]["got"] for c in checks]
    row["av_offsets_ms"] = [(c["av_start_offset_ms"]["got"], c["av_end_offset_ms"]["got"]) for c in checks]
    row["durations_s"] = [(c["video_duration_s"]["got"], c["audio_duration_s"]["got"]) for c in checks]
    row["silences"] = sum(c["silences_5ms"]["count"] for c in checks)
    row["failed_checks"] = sorted({k for c in checks for k, v in c.items() if not v["ok"]})
    measured = [c["psnr"] for c in checks if "psnr" in c and not c["psnr"]["identical"]]
    row["psnr_identical"] = bool(checks) and all(c.get("psnr", {}).get("identical") for c in checks)
    if measured:
        row["psnr_average_db"] = min(p["average_db"] for p in measured if p["average_db"] is not None)
        worst = min(measured, key=lambda p: p["worst_db"])
        row["psnr_worst_db"], row["psnr_worst_frame"] = worst["worst_db"], worst["worst_frame"]
    return row


def fmt(v, spec="", none="—"):
    return none if v is None else format(v, spec)


def table(rows, source):
    lines = [
        "| run | nodes (CPUs) | time to result s | vs 1 node | vs single-pass | segments (per node) "
        "| join ms | join share | overhead ms/segment | frames | video / audio s | A/V start / end ms "
        "| silences ≥ 5 ms | PSNR vs single-pass avg / worst dB (frame) | seams |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|---:|---|---|",
    ]
    for r in rows:
        if r.get("time_to_result_s") is None:
            lines.append(f"| {r['name']} | {r['nodes']} ({r['cpus']}) | failed: {'; '.join(r['errors'])[:300]} "
                         + "| " * 12 + "|")
            continue
        per_node = ", ".join(f"{k} {v}" for k, v in r["segments_per_node"].items())
        if r["fanout"] == "off":
            psnr_cell = "reference"
        elif r.get("psnr_identical"):
            psnr_cell = "identical (every frame)"
        elif r.get("psnr_worst_db") is not None:
            psnr_cell = (f"{fmt(r.get('psnr_average_db'), '.2f')} / {r['psnr_worst_db']:.2f} "
                         f"({r['psnr_worst_frame']})")
        else:
            psnr_cell = "—"
        seams = "ok" if r["seams_ok"] else "FAILED: " + ", ".join(r["failed_checks"])
        if r["errors"]:
            seams += "; " + "; ".join(r["errors"])
        lines.append(
            f"| {r['name']} | {r['nodes']} ({r['cpus']}) | {r['time_to_result_s']:.2f} "
            f"| {fmt(r.get('ratio_vs_1_node'), '.2f')} | {fmt(r.get('ratio_vs_single_pass'), '.2f')} "
            f"| {fmt(r['segments'], 'g')}{f' ({per_node})' if per_node else ''} "
            f"| {fmt(r['join_ms'], '.0f')} | {fmt(r['join_share'], '.1%')} | {fmt(r['overhead_ms_per_segment'], '.0f')} "
            f"| {'/'.join(str(f) for f in r['frames'])} of {source['frames']} "
            f"| {', '.join(f'{v:.3f} / {a:.3f}' for v, a in r['durations_s'])} "
            f"| {', '.join(f'{s:+.1f} / {e:+.1f}' for s, e in r['av_offsets_ms'])} "
            f"| {r['silences']} | {psnr_cell} | {seams} |")
    return "\n".join(lines)


def targets(rows):
    by = {r["key"]: r for r in rows}
    out = []
    one, two = by.get("n1"), by.get("n2")
    if one and two and one.get("time_to_result_s") and two.get("time_to_result_s"):
        ratio = two["time_to_result_s"] / one["time_to_result_s"]
        out.append(f"- 2 single-core nodes <= 0.6x the time of one: {ratio:.2f}x "
                   f"({two['time_to_result_s']:.2f} s vs {one['time_to_result_s']:.2f} s): "
                   f"**{'met' if ratio <= 0.6 else 'not met'}**")
    shares = [(r["name"], r["join_share"]) for r in rows if r.get("join_share") is not None]
    if shares:
        worst = max(shares, key=lambda s: s[1])
        out.append(f"- join < 5 % of the render: at most {worst[1]:.1%} ({worst[0]}): "
                   f"**{'met' if worst[1] < 0.05 else 'not met'}**")
    else:
        out.append("- join < 5 % of the render: no join measured (no split)")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1,2,3", help="node counts with --fanout auto (default 1,2,3)")
    p.add_argument("--repeats", type=int, default=1, help="renders per scenario (same cluster); medians")
    p.add_argument("--source-seconds", type=int, default=60, help="source length (default 60)")
    p.add_argument("--segment-seconds", default="10s", help="--segment-seconds of the nodes (default 10s)")
    p.add_argument("--segment-min-duration", default=None,
                   help="--segment-min-duration of the nodes (default: half the source, which must be longer)")
    p.add_argument("--cpus", default=",".join(str(c) for c in sorted(os.sched_getaffinity(0))),
                   help="CPUs the nodes are pinned to, node I to the ((I-1) mod count)-th; N nodes use "
                        "the first min(N, count) (default: every CPU this process may use)")
    p.add_argument("--min-psnr", type=float, default=35.0,
                   help="worst frame's PSNR against the single-pass output, dB (default 35)")
    p.add_argument("--node-args", default="", help="more `vidforge serve` flags for every node")
    p.add_argument("--timeout", type=int, default=900, help="seconds per wait for one render (default 900)")
    p.add_argument("--no-reference", action="store_true", help="skip the single-pass (--fanout off) row")
    p.add_argument("--out", default="segment-bench")
    p.add_argument("--bin", default=os.environ.get("VIDFORGE_BIN", os.path.join(ROOT, "target/release/vidforge")))
    args = p.parse_args()
    if args.repeats < 1 or args.source_seconds < 2:
        sys.exit("--repeats must be at least 1 and --source-seconds at least 2")
    if args.segment_min_duration is None:
        args.segment_min_duration = f"{args.source_seconds // 2}s"
    args.bin = os.path.abspath(args.bin)
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"{args.bin} is missing: make build")
    cpus = [c for c in args.cpus.split(",") if c]
    node_counts = [int(x) for x in args.nodes.split(",")]
    scenarios = [] if args.no_reference else [
        {"name": "single-pass (--fanout off)", "key": "ref", "nodes": 1, "fanout": "off", "expect_split": False}]
    for n in node_counts:
        scenarios.append({"name": f"{n} node{'s' if n > 1 else ''}", "key": f"n{n}", "nodes": n,
                          "fanout": "auto", "expect_split": n > 1})
    for sc in scenarios:
        sc["cpus"] = ",".join(cpus[:min(sc["nodes"], len(cpus))])
    os.makedirs(args.out, exist_ok=True)
    info = cb.machine()
    started = time.monotonic()
    results = {}
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="segment-bench-") as work:
            os.chmod(work, 0o755)
            print(f"making the source: {args.source_seconds} s 1080p25, IDR every 2 s, 440 Hz tone", flush=True)
            src, logo = make_fixtures(work, args.source_seconds)
            fixtures = {"source": src, "logo": logo}
            source_info = probe(src)
            source_info["keyframes_s"] = keyframe_times(src)
            control = seam_checks(src, source_info, None, work, args.min_psnr)
            print(f"  source: {source_info['frames']} frames, {len(source_info['keyframes_s'])} keyframes, "
                  f"control checks {'ok' if control['ok'] else 'FAILED'}", flush=True)
            ref_output = None
            for sc in scenarios:
                print(f"{sc['name']} on CPU {sc['cpus']}: starting the cluster", flush=True)
                reps = run_scenario(args, sc, fixtures, source_info, ref_output, work)
                if sc["key"] == "ref":
                    done = [r for r in reps if r.get("output")]
                    ref_output = done[0]["output"] if done else None
                results[sc["key"]] = reps
                rows.append(summarize(sc, reps))
            for reps in results.values():
                for r in reps:
                    r.pop("output", None)
    except (BenchError, OSError, subprocess.SubprocessError) as e:
        sys.exit(f"segment-bench: FAIL: {e}")
    by = {r["key"]: r for r in rows}
    for r in rows:
        for key, base in (("ratio_vs_1_node", by.get("n1")), ("ratio_vs_single_pass", by.get("ref"))):
            if base and base.get("time_to_result_s") and r.get("time_to_result_s"):
                r[key] = round(r["time_to_result_s"] / base["time_to_result_s"], 3)
    text = table(rows, source_info)
    goals = targets(rows)
    total_s = round(time.monotonic() - started)
    print(text + "\n\n" + goals)
    head = (f"{info['date_utc']}, {info['nproc']} x {info['cpu_model']}, {os.path.basename(args.bin)}: "
            f"a {args.source_seconds} s 1920x1080 25 fps source ({source_info['frames']} frames, IDR every 2 s, "
            f"440 Hz tone) -> 1080p mp4 with a watermark, approved at once; {args.repeats} repeat(s), medians. "
            f"Nodes: `--render-slots 1 --speculative off --backend cpu --segment-seconds {args.segment_seconds} "
            f"--segment-min-duration {args.segment_min_duration}`, pinned with taskset (CPUs in brackets). "
            f"Time to result: approval -> completed (PostgreSQL decided_at -> finished_at). Overhead: "
            f"(nodes x render phase - sum of segment elapsed_ms) / segments. Total run {total_s} s.\n\n")
    with open(os.path.join(args.out, "segment-bench.md"), "w") as f:
        f.write(head + text + "\n\nTargets:\n\n" + goals + "\n")
    with open(os.path.join(args.out, "segment-bench.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k != "out"}, "machine": info,
                   "source": source_info, "source_control_checks": control, "total_s": total_s,
                   "rows": rows, "repeats": results}, f, indent=2, default=str)
        f.write("\n")
    bad = [r["name"] for r in rows if r["errors"] or not r.get("seams_ok", False)]
    if bad or not control["ok"]:
        sys.exit(f"segment-bench: FAIL: {', '.join(bad) or 'the source control checks'} "
                 f"(details in {args.out}/segment-bench.json)")


if __name__ == "__main__":
    main()
