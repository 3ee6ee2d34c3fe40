"""Render a video with vidforge from the official Python MCP SDK (`mcp` 2.x), in about 50 lines.

Uploads FILE to the server, asks `vidforge_render_video` for a 720p mp4, polls
`vidforge_get_render_status` until the render ends and prints where to download it. The
client declares no tasks extension, so it gets vidforge's plain fallback tools.

Usage: python quickstart.py SERVER_URL FILE      (SERVER_URL like http://127.0.0.1:8080)
Set VIDFORGE_TOKEN when the server requires bearer tokens.
"""

import asyncio
import json
import os
import sys
import urllib.parse
import urllib.request

import httpx2  # the SDK's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def upload(server: str, path: str, headers: dict) -> str:
    """POST the file to /assets; returns its vidforge://assets/... URI."""
    url = f"{server}/assets?name={urllib.parse.quote(os.path.basename(path))}"
    # urllib would label the bytes application/x-www-form-urlencoded, which uploads refuse.
    headers = {**headers, "Content-Type": "application/octet-stream"}
    with open(path, "rb") as f:
        req = urllib.request.Request(url, data=f.read(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)["uri"]


async def main(server: str, path: str) -> None:
    token = os.environ.get("VIDFORGE_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    source = upload(server, path, headers)
    print(f"uploaded {path} as {source}")
    transport = streamable_http_client(f"{server}/mcp", http_client=httpx2.AsyncClient(headers=headers))
    async with Client(transport) as client:
        args = {"source_asset_uri": source, "output_format": "mp4", "resolution": "720p"}
        accepted = (await client.call_tool("vidforge_render_video", args)).structured_content
        render_id = accepted["render_id"]
        print(f"render {render_id} accepted")
        for _ in range(600):  # at most ~5 minutes
            status = (await client.call_tool("vidforge_get_render_status", {"render_id": render_id})).structured_content
            if status.get("terminal"):
                break
            await asyncio.sleep(0.5)
        else:
            sys.exit(f"render {render_id} did not finish in time")
    if status.get("state") != "succeeded":
        sys.exit(f"render {render_id} ended {status.get('state')}: {status.get('error')}")
    print(f"done: {status['video_uri']}")
    print(f"download: {server}/videos/{render_id}/final.mp4")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2]))
