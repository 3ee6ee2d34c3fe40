#!/usr/bin/python3
"""vidforge's MCP App in a real host: the official ext-apps host bridge in headless Chromium.

Started by scripts/run-app-host-test.sh against a running `vidforge serve` (tokens alice and
bob). It serves the test host (build/host.js: @modelcontextprotocol/client + ext-apps'
AppBridge and PostMessageTransport, bundled by esbuild) on one loopback origin, with a relay of
/mcp to vidforge (the page's own origin, as a host's backend would be), and the sandbox proxy
(src/sandbox.html) on another origin. Then, in Chromium (Debian's chromium + chromium-driver
+ python3-selenium, as tests/browser/ui_test.py):

  1. alice renders a watermarked webm: the view appears in the sandboxed iframe under the CSP
     of `_meta.ui.csp` (a foreign image is blocked), the preview shows the watermark's red at
     its place (screenshot kept), the hostile file names are text; Approve ends the render
     with watermark_applied: true and the player's currentTime advances;
  2. a second render is rejected with a hostile note: the view shows watermark_rejected in
     words, the note as text; the server agrees;
  3. the app-only tools are listed with visibility ["app"] and absent from the model's list;
     bob's host calling them on alice's render gets render_not_found.

Usage: /usr/bin/python3 tests/app-host/host_test.py BASE_URL WORK_DIR SERVER_LOG
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from task_render import Mcp  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--autoplay-policy=no-user-gesture-required", "--window-size=900,1000"]
ALICE, BOB = "alice-secret-token", "bob-secret-token"
APP_TOOLS = {"vidforge_app_preview", "vidforge_app_playback"}
HOSTILE_NAME = 'clip<img src=x onerror="window.pwned=1">.mp4'
HOSTILE_NOTE = 'too <b>bold</b> <img src=x onerror="window.pwned=1">'


def fail(why: str) -> None:
    print(f"app-host-test: FAIL: {why}", flush=True)
    raise SystemExit(1)


def ok(what: str) -> None:
    print(f"  ok: {what}", flush=True)


def wait_until(what: str, probe, timeout: float, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 2):
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    fail(f"timed out after {timeout:.0f} s waiting for {what}")


def serve(directory: str, relay_to: str | None) -> tuple[http.server.ThreadingHTTPServer, int]:
    """Static files of `directory` on a free loopback port; /mcp relayed to `relay_to`."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=directory, **kw)

        def log_message(self, *a):
            pass

        def relay(self) -> None:
            if relay_to is None or not self.path.startswith("/mcp"):
                self.send_error(404)
                return
            if self.command == "GET":
                # No server-to-client stream through the relay: the client polls.
                self.send_error(405)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            keep = {k: v for k, v in self.headers.items()
                    if k.lower() not in ("host", "origin", "referer", "connection", "content-length")}
            req = urllib.request.Request(relay_to + self.path, body, keep, method=self.command)
            try:
                resp = urllib.request.urlopen(req, timeout=120)
                status, headers, data = resp.status, resp.headers, resp.read()
            except urllib.error.HTTPError as e:
                status, headers, data = e.code, e.headers, e.read()
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.startswith("/mcp"):
                self.relay()
            else:
                super().do_GET()

        do_POST = relay
        do_DELETE = relay

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


class Test:
    def __init__(self, base: str, work: str, log: str) -> None:
        self.base, self.work, self.log = base, work, log
        self.shots = os.environ.get("VIDFORGE_SCREENSHOTS") or os.path.join(work, "screenshots")
        os.makedirs(self.shots, exist_ok=True)
        site = os.path.join(work, "host-site")
        os.makedirs(site, exist_ok=True)
        shutil.copy(os.path.join(HERE, "src", "host.html"), site)
        shutil.copy(os.path.join(HERE, "build", "host.js"), site)
        sandbox = os.path.join(work, "sandbox-site")
        os.makedirs(sandbox, exist_ok=True)
        shutil.copy(os.path.join(HERE, "src", "sandbox.html"), sandbox)
        self.host_server, self.host_port = serve(site, base)
        self.sandbox_server, self.sandbox_port = serve(sandbox, None)
        self.driver = None

    def browser(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={os.path.join(self.work, 'chromium-app')}")
        service = Service(CHROMEDRIVER, log_path=os.path.join(self.work, "chromedriver-app.log"))
        self.driver = webdriver.Chrome(service=service, options=opts)
        self.driver.set_page_load_timeout(60)
        self.driver.set_script_timeout(30)
        return self.driver

    def upload(self, path: str, name: str, token: str) -> dict:
        with open(path, "rb") as f:
            data = f.read()
        req = urllib.request.Request(f"{self.base}/assets?name={urllib.parse.quote(name)}", data, {
            "Content-Type": "application/octet-stream", "Authorization": f"Bearer {token}"}, method="POST")
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def fixtures(self) -> None:
        clip = os.path.join(self.work, "blue.mp4")
        logo = os.path.join(self.work, "logo.png")
        ff = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"]
        subprocess.run(ff + ["-f", "lavfi", "-i", "color=c=0x1040c0:s=320x180:rate=25:duration=2",
                             "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", clip],
                       check=True, timeout=120)
        subprocess.run(ff + ["-f", "lavfi", "-i", "color=c=red:s=96x48,format=rgba", "-frames:v", "1", logo],
                       check=True, timeout=60)
        source = self.upload(clip, HOSTILE_NAME, ALICE)
        self.source_name = source["file_name"]
        self.clip = source["uri"]
        self.logo = self.upload(logo, "logo.png", ALICE)["uri"]
        ok(f"fixtures uploaded for alice (source stored as {self.source_name!r})")

    def args(self) -> dict:
        return {"source_asset_uri": self.clip, "output_format": "webm", "resolution": "720p",
                "watermark": {"image_asset_uri": self.logo, "position": "top_left", "opacity": 0.8},
                "quality_report": True}

    def open_host(self, token: str, **params) -> None:
        q = {"token": token, "sandbox": f"http://127.0.0.1:{self.sandbox_port}/sandbox.html"}
        q.update({k: (v if isinstance(v, str) else json.dumps(v)) for k, v in params.items()})
        self.driver.switch_to.default_content()
        self.driver.get(f"http://127.0.0.1:{self.host_port}/host.html?{urllib.parse.urlencode(q)}")

    def host_state(self) -> dict:
        self.driver.switch_to.default_content()
        state = self.driver.execute_script("return window.hostState || {};")
        if state.get("errors"):
            fail(f"the host failed: {state['errors']}")
        return state

    def into_view(self) -> None:
        from selenium.webdriver.common.by import By
        d = self.driver
        d.switch_to.default_content()
        d.switch_to.frame(d.find_element(By.ID, "sandbox"))
        wait_until("the view's iframe", lambda: d.find_elements(By.ID, "view"), 30)
        d.switch_to.frame(d.find_element(By.ID, "view"))

    def view(self, script: str):
        self.into_view()
        return self.driver.execute_script(script)

    def render_in_host(self) -> str:
        self.open_host(ALICE, args=self.args())
        state = wait_until("the host to render the view", lambda: (s := self.host_state()).get("viewInitialized") and s, 60)
        rid = state["renderResult"]["structuredContent"]["render_id"]
        if state["csp"] != {"resourceDomains": [self.base]}:
            fail(f"_meta.ui.csp is {state['csp']}, want resourceDomains [{self.base}] only")
        return rid

    def wait_preview(self) -> None:
        wait_until("the preview image", lambda: self.view(
            "const i = document.getElementById('preview'); return !!(i && i.src.startsWith('data:image/png') && i.complete && i.naturalWidth > 0);"), 120, 0.5)

    def approve_run(self, mcp: Mcp) -> None:
        from selenium.webdriver.common.by import By
        rid = self.render_in_host()
        ok(f"render {rid} started by the host; the view initialized under CSP {self.host_state()['csp']}")
        self.wait_preview()
        # The watermark's red at its place (top left), the source's blue elsewhere.
        colours = self.view("""
            const i = document.getElementById('preview'), c = document.createElement('canvas');
            c.width = i.naturalWidth; c.height = i.naturalHeight;
            const g = c.getContext('2d'); g.drawImage(i, 0, 0);
            const at = (fx, fy) => Array.from(g.getImageData(Math.floor(c.width * fx), Math.floor(c.height * fy), 1, 1).data);
            return { size: [c.width, c.height], corner: at(0.03, 0.04), middle: at(0.5, 0.5) };""")
        corner, middle = colours["corner"], colours["middle"]
        if not (corner[0] > 150 and corner[0] > corner[2] + 60 and middle[2] > middle[0] + 60):
            fail(f"the preview does not show the red watermark top left over the blue source: {colours}")
        ok(f"preview {colours['size']} shows the watermark: corner {corner[:3]}, middle {middle[:3]}")
        self.driver.find_element(By.ID, "preview").screenshot(os.path.join(self.shots, "app-preview.png"))
        self.driver.switch_to.default_content()
        self.driver.save_screenshot(os.path.join(self.shots, "app-host.png"))
        self.into_view()
        settings = self.driver.find_element(By.ID, "settings")
        text = settings.text
        if self.source_name not in text or "top left" not in text or "80%" not in text:
            fail(f"the settings in words are wrong: {text!r}")
        if settings.find_elements(By.TAG_NAME, "img") or self.driver.execute_script("return window.pwned"):
            fail("the hostile file name became HTML")
        ok(f"settings in words, file name as text: {text!r}")
        # CSP: nothing from an undeclared origin.
        blocked = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1], img = new Image();
            img.onload = () => done('loaded'); img.onerror = () => done('blocked');
            img.src = 'http://127.0.0.1:%d/host.html?probe=' + Date.now();""" % self.host_port)
        if blocked != "blocked":
            fail("the view loaded an image from an undeclared origin: the CSP is not applied")
        ok("the view's CSP blocks an undeclared origin")
        self.driver.find_element(By.ID, "approve").click()
        wait_until("the player", lambda: self.view(
            "const v = document.getElementById('player'); return !!(v && v.src && !document.getElementById('result').hidden);"), 180, 0.5)
        status = mcp.call("tools/call", {"name": "vidforge_get_render_status", "arguments": {"render_id": rid}},
                          name="vidforge_get_render_status")["structuredContent"]
        if status.get("state") != "succeeded" or status.get("watermark_applied") is not True:
            fail(f"after Approve the render is {status}")
        ok("Approve in the view: succeeded with watermark_applied: true")
        # The quality report, asked for, in one line a person reads (from the same figures).
        q = status.get("quality") or fail(f"a measured render's status has no quality: {status}")
        line = wait_until("the quality line", lambda: self.view(
            "const q = document.getElementById('quality'); return !q.hidden && q.textContent;"), 30, 0.3)
        m = re.fullmatch(r"Quality: PSNR ([0-9.]+) dB, worst ([0-9.]+) dB at 00:0[0-9], SSIM (0\.9[0-9]{2}|1\.000)", line)
        if not m or abs(float(m[1]) - q["psnr_db"]) > 0.06 or abs(float(m[2]) - q["worst"]["psnr_db"]) > 0.06:
            fail(f"the view's quality line is {line!r}, the status says {q}")
        ok(f"the view says how faithful the video is: {line!r}")
        src = self.view("return document.getElementById('player').src;")
        if not src.startswith(f"{self.base}/play/{rid}/"):
            fail(f"the player's link is {src}")
        t0 = self.view("const v = document.getElementById('player'); v.muted = true; v.play(); return v.currentTime;")
        t1 = wait_until("the player's currentTime to advance", lambda: (t := self.view(
            "return document.getElementById('player').currentTime;")) > t0 + 0.2 and t, 30, 0.3)
        ok(f"the player plays the signed link: currentTime {t0:.2f} -> {t1:.2f}")
        self.driver.switch_to.default_content()
        self.driver.save_screenshot(os.path.join(self.shots, "app-player.png"))
        calls = self.host_state()["appCalls"]
        if not APP_TOOLS <= set(calls) or "vidforge_approve_watermark" not in calls:
            fail(f"the view's calls through the host: {calls}")
        self.approved = rid

    def reject_run(self, mcp: Mcp) -> None:
        from selenium.webdriver.common.by import By
        rid = self.render_in_host()
        self.wait_preview()
        self.into_view()
        self.driver.find_element(By.ID, "note").send_keys(HOSTILE_NOTE)
        self.driver.find_element(By.ID, "reject").click()
        wait_until("the failure in words", lambda: self.view(
            "return !document.getElementById('failure').hidden && document.getElementById('errcode').textContent;"), 120, 0.5)
        self.into_view()
        code = self.driver.find_element(By.ID, "errcode").text
        message = self.driver.find_element(By.ID, "errmsg").text
        reason = self.driver.find_element(By.ID, "errreason").text
        if "watermark_rejected" not in code:
            fail(f"the view shows {code!r} after Reject")
        if "<b>bold</b>" not in reason:
            fail(f"the view does not show the note as text: {reason!r}")
        if self.driver.find_elements(By.CSS_SELECTOR, "#failure b, #failure img") or self.driver.execute_script("return window.pwned"):
            fail("the hostile note became HTML")
        status = mcp.call("tools/call", {"name": "vidforge_get_render_status", "arguments": {"render_id": rid}},
                          name="vidforge_get_render_status")["structuredContent"]
        if status.get("state") != "failed" or status.get("error", {}).get("code") != "watermark_rejected":
            fail(f"after Reject the render is {status}")
        ok(f"Reject with a note: watermark_rejected in words ({message!r}), the note as text ({reason!r})")
        self.driver.switch_to.default_content()
        self.driver.save_screenshot(os.path.join(self.shots, "app-rejected.png"))

    def visibility_and_principals(self) -> None:
        state = self.host_state()
        listed = set(state["allTools"])
        if not APP_TOOLS <= listed or APP_TOOLS & set(state["modelTools"]):
            fail(f"visibility: listed {sorted(listed)}, model sees {state['modelTools']}")
        ok(f"app-only tools listed but not given to the model ({len(state['modelTools'])} model tools)")
        for tool in sorted(APP_TOOLS):
            self.open_host(BOB, mode="call", tool=tool, args={"render_id": self.approved})
            state = wait_until(f"bob's {tool}", lambda: (s := self.host_state()).get("done") and s, 30)
            result = state["callResult"]
            if not result.get("isError") or result["structuredContent"].get("code") != "render_not_found":
                fail(f"bob's host calling {tool} on alice's render got {result}")
        ok("another principal's host gets render_not_found from the app-only tools")

    def run(self) -> None:
        self.fixtures()
        self.browser()
        mcp = Mcp(f"{self.base}/mcp", ALICE)
        try:
            self.approve_run(mcp)
            self.visibility_and_principals()
            self.reject_run(mcp)
        finally:
            self.driver.quit()


def main() -> None:
    base, work, log = sys.argv[1:4]
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            fail(f"{exe} is missing (scripts/install-deps.sh)")
    if not os.path.isfile(os.path.join(HERE, "build", "host.js")):
        fail("tests/app-host/build/host.js is missing (scripts/run-app-host-test.sh bundles it)")
    started = time.monotonic()
    Test(base, work, log).run()
    print(f"app-host-test: passed in {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
