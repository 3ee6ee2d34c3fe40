"""Drives vidforge with the official Python MCP SDK (`mcp` 2.x) over the fallback tools.

The client declares no tasks extension, so vidforge answers `vidforge_render_video` with an
`accepted` result and the agent polls `vidforge_get_render_status`. Scenario:
  1. discover (mode "auto" probes `server/discover`), list tools;
  2. render with a watermark: accepted -> awaiting_watermark_approval -> approve -> succeeded;
  3. render again, reject the watermark: the status shows the `watermark_rejected` envelope,
     whose `repair` is called as-is and is accepted as a fresh render.
Every step asserts on what the server sent; any failure exits non-zero.

Usage: python fallback_render.py URL CLIP_URI LOGO_URI
Set VIDFORGE_TOKEN when the server requires bearer tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2  # the SDK's HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

WAIT_S = 180.0


def check(cond: bool, what: str, got: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}; got: {got!r}")
    print(f"  ok: {what}")


def structured(result: Any) -> dict[str, Any]:
    sc = result.structured_content
    check(isinstance(sc, dict), "the tool answered with structuredContent", result)
    return sc


async def poll_status(client: Client, render_id: str, until: Any) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        result = await client.call_tool("vidforge_get_render_status", {"render_id": render_id})
        if result.is_error or not isinstance(result.structured_content, dict):
            raise AssertionError(f"vidforge_get_render_status failed: {result}")
        status = result.structured_content
        if until(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"render {render_id} never reached the expected state; last: {status}")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def bearer_transport(url: str, token: str) -> AsyncIterator[Any]:
    """Streamable HTTP to `url` with `Authorization: Bearer <token>` on every request."""
    # The SDK's default timeouts: 30 s, and 300 s to read (SSE streams stay open).
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def server_target(url: str) -> Any:
    """What `Client` connects to: the URL itself, or with VIDFORGE_TOKEN a bearer transport."""
    token = os.environ.get("VIDFORGE_TOKEN")
    return bearer_transport(url, token) if token else url


async def main(url: str, clip: str, logo: str) -> None:
    args = {
        "source_asset_uri": clip,
        "output_format": "mp4",
        "resolution": "720p",
        "watermark": {"image_asset_uri": logo, "position": "top_left", "opacity": 0.6},
    }
    async with Client(server_target(url), mode="auto", read_timeout_seconds=60) as client:
        print("discover + tools/list")
        check(client.protocol_version == "2026-07-28", "negotiated 2026-07-28", client.protocol_version)
        check(client.server_info is not None and client.server_info.name == "vidforge", "server is vidforge", client.server_info)
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("vidforge_render_video", "vidforge_get_render_status", "vidforge_approve_watermark"):
            check(name in tools, f"tools/list has {name}", sorted(tools))

        print("render + approve through the fallback tools")
        accepted = await client.call_tool("vidforge_render_video", args)
        check(not accepted.is_error, "render accepted without an error", accepted)
        sc = structured(accepted)
        check(sc.get("status") == "accepted", "status is accepted", sc)
        check(sc.get("follow_up", {}).get("tool") == "vidforge_get_render_status", "follow-up names the status tool", sc)
        render_id = sc["render_id"]

        waiting = await poll_status(client, render_id, lambda s: s.get("state") == "awaiting_watermark_approval" or s.get("terminal"))
        check(waiting.get("state") == "awaiting_watermark_approval", "render waits for watermark approval", waiting)
        check(waiting.get("follow_up", {}).get("tool") == "vidforge_approve_watermark", "follow-up names the approve tool", waiting)
        preview_uri = waiting.get("watermark_preview_uri")
        check(preview_uri == f"vidforge://renders/{render_id}/watermark-preview.png", "preview URI offered", waiting)
        preview = await client.read_resource(preview_uri)
        check(preview.contents[0].mime_type == "image/png", "preview resource is a PNG", preview.contents[0].mime_type)

        approved = await client.call_tool("vidforge_approve_watermark", {"render_id": render_id, "approved": True})
        check(not approved.is_error, "approval recorded", approved)
        done = await poll_status(client, render_id, lambda s: s.get("terminal") is True)
        check(done.get("state") == "succeeded", "render succeeded", done)
        check(done.get("watermark_applied") is True, "watermark applied", done)
        check(done.get("video_uri") == f"vidforge://videos/{render_id}/final.mp4", "video URI returned", done)

        print("reject the watermark, then call the repair as-is")
        accepted = await client.call_tool("vidforge_render_video", args)
        render_id = structured(accepted)["render_id"]
        await poll_status(client, render_id, lambda s: s.get("state") == "awaiting_watermark_approval")
        rejected = await client.call_tool(
            "vidforge_approve_watermark", {"render_id": render_id, "approved": False, "note": "logo too large"}
        )
        check(not rejected.is_error, "rejection recorded", rejected)
        done = await poll_status(client, render_id, lambda s: s.get("terminal") is True)
        check(done.get("state") == "failed", "rejected render ends failed", done)
        env = done.get("error") or {}
        check(env.get("code") == "watermark_rejected", "status carries the watermark_rejected envelope", done)
        repair = env.get("repair", {})
        check(repair.get("tool") == "vidforge_render_video", "repair names vidforge_render_video", env)
        check(repair.get("arguments") == args, "repair arguments are the original request", repair)
        again = await client.call_tool(repair["tool"], repair["arguments"])
        check(not again.is_error, "the repair call is accepted", again)
        again_sc = structured(again)
        check(again_sc.get("status") == "accepted" and again_sc.get("render_id") != render_id, "repair starts a new render", again_sc)
    print("python fallback client: PASS")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    except Exception as exc:  # one clear line for CI, then the traceback
        print(f"python fallback client: FAIL: {exc}", file=sys.stderr)
        raise
