#!/usr/bin/python3
"""Headless Chromium signs in to vidforge's approval page through the authorization server.

Run by scripts/run-oauth-clients.sh against a vidforge that trusts the test authorization server
(tests/oauth/authorization-server.mjs, started with --default-login vidforge-tests) and signs
its pages in with the `vidforge-browser` client (authorization code + PKCE):

  1. a client-credentials access token of `vidforge-tests` (its `sub` is the client id) uploads
     a clip and a logo and starts a render with a watermark (tasks extension): input_required;
  2. Chromium opens the approval page: it is sent to /signin, whose "Sign in with <issuer>"
     link goes to the authorization server, which signs in `vidforge-tests` (no form) and
     returns to /oauth/callback; the browser lands on the approval page with an HttpOnly
     session cookie and no token anywhere in its URLs;
  3. Chromium approves; tasks/get ends completed with the watermark applied.

Every wait is bounded; a missing prerequisite is a failure, never a skip.

Usage: /usr/bin/python3 tests/browser/oauth_sign_in.py BASE_URL ISSUER WORK_DIR
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ui_test  # noqa: E402  (the UI test's browser, HTTP and wait helpers)
from ui_test import Failure, TASKS, Mcp, fail, http, ok, wait_until  # noqa: E402

CLIENT = ("vidforge-tests", "vidforge-tests-secret")


def client_credentials_token(issuer: str, resource: str) -> str:
    body = urllib.parse.urlencode({"grant_type": "client_credentials",
                                   "scope": "vidforge:render", "resource": resource}).encode()
    basic = base64.b64encode(f"{CLIENT[0]}:{CLIENT[1]}".encode()).decode()
    status, _, answer = http("POST", f"{issuer}/token", body, {
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Basic {basic}"})
    if status != 200:
        fail(f"client-credentials token: HTTP {status}: {answer[:300]!r}")
    return json.loads(answer)["access_token"]


def fixtures(work: str) -> tuple[str, str]:
    clip, logo = os.path.join(work, "oauth-clip.mp4"), os.path.join(work, "oauth-logo.png")
    for args in (["-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25:duration=0.6",
                  "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", clip],
                 ["-f", "lavfi", "-i", "color=c=red@0.6:s=96x48,format=rgba", "-frames:v", "1",
                  logo]):
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args], check=True,
                       timeout=60)
    return clip, logo


def main() -> int:
    base, issuer, work = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/"), sys.argv[3]
    ui = ui_test.UiTest(base, work, os.path.join(work, "server.log"))
    try:
        ui.check_prerequisites()
        token = client_credentials_token(issuer, f"{base}/mcp")
        ok("client-credentials access token of vidforge-tests")
        clip, logo = fixtures(work)
        ui.clip, ui.logo = ui.upload(clip, token), ui.upload(logo, token)
        mcp = Mcp(f"{base}/mcp", token, "vidforge-oauth-sign-in", {"extensions": {TASKS: {}}})
        task_id = ui.render(mcp)
        ui.wait_task(mcp, task_id, "input_required")
        ok(f"render {task_id} awaits approval")

        driver = ui.new_browser("oauth")
        approval = f"{base}{ui.approval_path(task_id)}"
        driver.get(approval)
        wait_until("the sign-in page", lambda: ui.path_of(driver) == "/signin", 30)
        link = ui.by_id(driver, "signin-oauth")
        if issuer not in link.text:
            fail(f"#signin-oauth does not name the issuer {issuer}: {link.text!r}")
        ok(f"/signin offers {link.text.strip()!r}")
        link.click()
        wait_until("the approval page after the authorization server",
                   lambda: ui.path_of(driver) == ui.approval_path(task_id), 60)
        cookie = driver.get_cookie("vidforge_session")
        if not cookie or not cookie.get("httpOnly"):
            fail(f"no HttpOnly vidforge_session after the sign-in: {cookie}")
        if "token" in driver.current_url or "code=" in driver.current_url:
            fail(f"a credential is left in the page URL: {driver.current_url}")
        ok("signed in through the authorization server: back on the approval page, "
           "HttpOnly session cookie")
        ui.by_id(driver, "approve").click()
        decision = ui.by_id(driver, "decision", 30)
        ok(f"approved in the browser: #decision {decision.text.strip()!r}")
        task = ui.wait_task(mcp, task_id, "completed", 180)
        result = task.get("result") or {}
        structured = result.get("structuredContent") or {}
        if result.get("isError") or structured.get("watermark_applied") is not True:
            fail(f"the approved render did not succeed with its watermark: {task}")
        ok("tasks/get: completed, watermark applied")
        return 0
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        ui.diagnose()
        return 1
    finally:
        ui.stop()


if __name__ == "__main__":
    sys.exit(main())
