"""Drives vidforge with the official Python MCP SDK 1.x (`mcp` 1.30) in a legacy-era session.

The 1.x SDK speaks the initialize-based protocol (2025-11-25 and older): `initialize` opens a
session (`Mcp-Session-Id`) on the same /mcp endpoint as the 2026-07-28 wire. A legacy session
never has the tasks extension or elicitation, so vidforge answers `vidforge_render_video` with
an `accepted` result and the agent works through the fallback tools. Scenario:
  1. initialize (a 2025 revision, server vidforge, a session id), list the five tools;
  2. render with a watermark: accepted -> awaiting_watermark_approval -> approve -> succeeded;
     read the result video with resources/read (base64 blob of an mp4);
  3. render with a watermark again and cancel it while it waits: it ends cancelled.
Every step asserts on what the server sent; any failure exits non-zero.

Usage: python legacy_render.py URL CLIP_URI LOGO_URI
Set VIDFORGE_TOKEN when the server requires bearer tokens.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from datetime import timedelta
from typing import Any

import httpx  # the 1.x SDK's HTTP client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

WAIT_S = 180.0
POLL_MAX = 1000  # polls per wait, besides WAIT_S
LEGACY_REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
TOOLS = (
    "vidforge_render_video",
    "vidforge_get_render_status",
    "vidforge_approve_watermark",
    "vidforge_cancel_render",
    "vidforge_get_capabilities",
)


def check(cond: bool, what: str, got: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}; got: {got!r}")
    print(f"  ok: {what}")


def structured(result: Any) -> dict[str, Any]:
    sc = result.structuredContent
    check(isinstance(sc, dict), "the tool answered with structuredContent", result)
    return sc


async def poll_status(session: ClientSession, render_id: str, until: Any) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    for _ in range(POLL_MAX):
        result = await session.call_tool("vidforge_get_render_status", {"render_id": render_id})
        if result.isError or not isinstance(result.structuredContent, dict):
            raise AssertionError(f"vidforge_get_render_status failed: {result}")
        status = result.structuredContent
        if until(status):
            return status
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    raise AssertionError(f"render {render_id} never reached the expected state; last: {status}")


def http_client() -> httpx.AsyncClient:
    """The SDK's default timeouts (30 s, 300 s to read: SSE streams stay open); with
    VIDFORGE_TOKEN, `Authorization: Bearer <token>` on every request."""
    token = os.environ.get("VIDFORGE_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True)


async def main(url: str, clip: str, logo: str) -> None:
    args = {
        "source_asset_uri": clip,
        "output_format": "mp4",
        "resolution": "720p",
        "watermark": {"image_asset_uri": logo, "position": "top_left", "opacity": 0.6},
    }
    async with http_client() as http, streamable_http_client(url, http_client=http) as (read, write, session_id):
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=60)) as session:
            print("initialize + tools/list")
            init = await session.initialize()
            check(init.protocolVersion in LEGACY_REVISIONS, "negotiated a 2025 (legacy) revision", init.protocolVersion)
            check(init.serverInfo.name == "vidforge", "server is vidforge", init.serverInfo)
            check(bool(session_id()), "the server opened a session (Mcp-Session-Id)", session_id())
            tools = {t.name for t in (await session.list_tools()).tools}
            check(tools == set(TOOLS), "tools/list has the five vidforge tools", sorted(tools))

            print("render + approve through the fallback tools")
            accepted = await session.call_tool("vidforge_render_video", args)
            check(not accepted.isError, "render accepted without an error", accepted)
            sc = structured(accepted)
            check(sc.get("status") == "accepted", "status is accepted (no task in a legacy session)", sc)
            check(sc.get("follow_up", {}).get("tool") == "vidforge_get_render_status", "follow-up names the status tool", sc)
            render_id = sc["render_id"]

            waiting = await poll_status(
                session, render_id, lambda s: s.get("state") == "awaiting_watermark_approval" or s.get("terminal")
            )
            check(waiting.get("state") == "awaiting_watermark_approval", "render waits for watermark approval", waiting)
            check(waiting.get("follow_up", {}).get("tool") == "vidforge_approve_watermark", "follow-up names the approve tool", waiting)
            approved = await session.call_tool("vidforge_approve_watermark", {"render_id": render_id, "approved": True})
            check(not approved.isError, "approval recorded", approved)
            done = await poll_status(session, render_id, lambda s: s.get("terminal") is True)
            check(done.get("state") == "succeeded", "render succeeded", done)
            check(done.get("watermark_applied") is True, "watermark applied", done)
            video_uri = done.get("video_uri")
            check(video_uri == f"vidforge://videos/{render_id}/final.mp4", "video URI returned", done)

            print("resources/read the result video")
            contents = (await session.read_resource(video_uri)).contents
            check(len(contents) == 1 and str(contents[0].uri) == video_uri, "one content for the video URI", contents)
            check(contents[0].mimeType == "video/mp4", "the resource is video/mp4", contents[0].mimeType)
            blob = getattr(contents[0], "blob", None)
            check(isinstance(blob, str) and blob, "the resource is a base64 blob", type(contents[0]).__name__)
            data = base64.b64decode(blob, validate=True)
            check(len(data) == done.get("size_bytes"), "decoded size matches size_bytes", (len(data), done.get("size_bytes")))
            check(b"ftyp" in data[:64], "the bytes are an mp4 (ftyp box)", data[:16])

            print("render again, cancel while it waits for approval")
            accepted = await session.call_tool("vidforge_render_video", args)
            render_id = structured(accepted)["render_id"]
            await poll_status(
                session, render_id, lambda s: s.get("state") == "awaiting_watermark_approval" or s.get("terminal")
            )
            cancelled = await session.call_tool("vidforge_cancel_render", {"render_id": render_id})
            check(not cancelled.isError, "cancel accepted", cancelled)
            done = await poll_status(session, render_id, lambda s: s.get("terminal") is True)
            check(done.get("state") == "cancelled", "cancelled render ends cancelled", done)
    print("python legacy client: PASS")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    except Exception as exc:  # one clear line for CI, then the traceback
        print(f"python legacy client: FAIL: {exc}", file=sys.stderr)
        raise
