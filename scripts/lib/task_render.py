"""One small render through the tasks extension, with nothing but the Python standard library.

Used by scripts/first-contact.sh against the server `make serve` started: server/discover,
tools/call vidforge_render_video (tasks extension declared, no watermark, so no approval),
tasks/get until the task is terminal, then the result downloaded over HTTP (its URL is also
written to OUT_FILE.url). Exits non-zero,
saying why, on anything unexpected; every wait is bounded.

Usage: python3 task_render.py BASE_URL SOURCE_ASSET_URI OUT_FILE
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WAIT_S = 300.0


class Mcp:
    """A minimal MCP-over-HTTP client (also used by scripts/cluster-bench.py)."""

    def __init__(self, url: str, token: str | None = None,
                 client_name: str = "vidforge-first-contact",
                 capabilities: dict | None = None) -> None:
        self.url = url
        self.token = token
        self.client_name = client_name
        # The clientCapabilities sent with every request: by default only the tasks extension
        # (tests/browser/ui_test.py also declares elicitation).
        self.capabilities = capabilities if capabilities is not None else {"extensions": {TASKS: {}}}
        self.next_id = 1

    def call(self, method: str, params: dict, name: str | None = None) -> dict:
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": self.client_name, "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        # A gateway answers 502 for a request that was in flight to a node that died, and a
        # server 503 while its store is unreachable: both are worth a few more tries.
        for attempt in range(10):
            req = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    ctype = resp.headers.get("Content-Type", "")
                    text = resp.read().decode()
                break
            except urllib.error.HTTPError as e:
                if e.code not in (502, 503) or attempt == 9:
                    raise
                time.sleep(0.5)
        if ctype.startswith("text/event-stream"):
            msgs = [json.loads(l[5:].strip()) for l in text.splitlines() if l.startswith("data:")]
            msgs = [m for m in msgs if "id" in m]
            if not msgs:
                fail(f"{method}: no JSON-RPC response in the SSE answer")
            answer = msgs[-1]
        else:
            answer = json.loads(text)
        if "error" in answer:
            fail(f"{method} answered an error: {answer['error']}")
        return answer["result"]


def fail(why: str) -> None:
    print(f"task_render: FAIL: {why}", file=sys.stderr)
    sys.exit(1)


def main(base: str, source: str, out: str) -> None:
    mcp = Mcp(f"{base}/mcp")
    info = mcp.call("server/discover", {})
    server_info = info.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {})
    if server_info.get("name") != "vidforge":
        fail(f"server/discover names {server_info!r}, not vidforge")
    if TASKS not in info.get("capabilities", {}).get("extensions", {}):
        fail(f"server/discover does not offer the tasks extension: {info.get('capabilities')}")
    print(f"  ok: server/discover: vidforge {server_info.get('version')}, tasks extension offered")

    args = {"source_asset_uri": source, "output_format": "mp4", "resolution": "720p"}
    created = mcp.call("tools/call", {"name": "vidforge_render_video", "arguments": args},
                       name="vidforge_render_video")
    if created.get("resultType") != "task":
        fail(f"expected a task, got {created}")
    task_id = created["taskId"]
    print(f"  ok: tools/call created task {task_id} ({created.get('status')})")

    deadline = time.monotonic() + WAIT_S
    seen = []
    while True:
        task = mcp.call("tasks/get", {"taskId": task_id}, name=task_id)
        status = task.get("status")
        if not seen or seen[-1] != status:
            seen.append(status)
        if status in ("completed", "failed", "cancelled"):
            break
        if time.monotonic() > deadline:
            fail(f"task still {status} after {WAIT_S:.0f} s")
        time.sleep(0.2)
    print(f"  ok: tasks/get: {' -> '.join(seen)}")
    if status != "completed":
        fail(f"task ended {status}: {task}")
    result = task.get("result", {})
    if result.get("isError"):
        fail(f"completed with an error: {result}")
    links = [c for c in result.get("content", []) if c.get("type") == "resource_link"]
    if not links:
        fail(f"no resource_link in the result: {result}")
    url = links[0].get("_meta", {}).get("com.vidforge/download_url")
    if not url:
        fail(f"the resource_link has no download URL: {links[0]}")
    with urllib.request.urlopen(url, timeout=60) as resp, open(out, "wb") as f:
        f.write(resp.read())
    with open(out + ".url", "w") as f:
        f.write(url + "\n")
    print(f"  ok: downloaded {url} -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
