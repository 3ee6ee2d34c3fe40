"""A render with a watermark, approved over MCP (tasks extension + form elicitation), with the
MCP client of task_render.py and nothing but the Python standard library. Used by
scripts/run-image-test.sh against the container; every wait is bounded.

  approve_render.py render BASE TOKEN SOURCE_URI LOGO_URI OUT_FILE
      tools/call vidforge_render_video (720p mp4, watermark), tasks/get until input_required,
      tasks/update accepting the watermark, tasks/get until completed, download the result to
      OUT_FILE; prints the task id (last line of stdout) and writes the URL to OUT_FILE.url.
  approve_render.py check BASE TOKEN TASK_ID OUT_FILE
      tasks/get of an earlier task: completed, not an error; downloads its result to OUT_FILE.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from task_render import TASKS, Mcp, fail  # noqa: E402

WAIT_S = 300.0
FORM_KEY = "watermark-approval-1"
ELICITING = {"extensions": {TASKS: {}}, "elicitation": {"form": {}, "url": {}}}


def wait_for(mcp: Mcp, task_id: str, want: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    seen: list[str] = []
    while True:
        task = mcp.call("tasks/get", {"taskId": task_id}, name=task_id)
        status = task.get("status")
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == want:
            print(f"  ok: tasks/get: {' -> '.join(seen)}")
            return task
        if status in ("completed", "failed", "cancelled"):
            fail(f"task {task_id} ended {status} while waiting for {want}: {task}")
        if time.monotonic() > deadline:
            fail(f"task {task_id} still {status} after {WAIT_S:.0f} s (waiting for {want})")
        time.sleep(0.2)


def download(task: dict, token: str, out: str) -> str:
    result = task.get("result", {})
    if result.get("isError"):
        fail(f"completed with an error: {result}")
    links = [c for c in result.get("content", []) if c.get("type") == "resource_link"]
    url = links[0].get("_meta", {}).get("com.vidforge/download_url") if links else None
    if not url:
        fail(f"no download URL in the result: {result}")
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=60) as resp, open(out, "wb") as f:
        f.write(resp.read())
    with open(out + ".url", "w") as f:
        f.write(url + "\n")
    print(f"  ok: downloaded {url} -> {out}")
    return url


def render(base: str, token: str, source: str, logo: str, out: str) -> None:
    mcp = Mcp(f"{base}/mcp", token, "vidforge-image-test", ELICITING)
    args = {"source_asset_uri": source, "output_format": "mp4", "resolution": "720p",
            "watermark": {"image_asset_uri": logo, "position": "bottom_right", "opacity": 0.8}}
    created = mcp.call("tools/call", {"name": "vidforge_render_video", "arguments": args},
                       name="vidforge_render_video")
    if created.get("resultType") != "task" or not created.get("taskId"):
        fail(f"tools/call vidforge_render_video: expected a task, got {created}")
    task_id = created["taskId"]
    print(f"  ok: tools/call created task {task_id} ({created.get('status')})")
    task = wait_for(mcp, task_id, "input_required")
    if FORM_KEY not in (task.get("inputRequests") or {}):
        fail(f"input_required without the {FORM_KEY} request: {task.get('inputRequests')}")
    mcp.call("tasks/update", {"taskId": task_id, "inputResponses": {
        FORM_KEY: {"action": "accept", "content": {"approved": True}}}}, name=task_id)
    print("  ok: tasks/update approved the watermark")
    download(wait_for(mcp, task_id, "completed"), token, out)
    print(task_id)


def check(base: str, token: str, task_id: str, out: str) -> None:
    mcp = Mcp(f"{base}/mcp", token, "vidforge-image-test", ELICITING)
    task = mcp.call("tasks/get", {"taskId": task_id}, name=task_id)
    if task.get("status") != "completed":
        fail(f"task {task_id} is {task.get('status')} after the restart, not completed: {task}")
    print(f"  ok: tasks/get {task_id}: completed")
    download(task, token, out)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "render":
        render(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
