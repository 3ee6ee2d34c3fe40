#!/usr/bin/python3
"""End-to-end test of the browser UI and the Prometheus endpoint of a running vidforge.

Drives the real server (started by scripts/run-ui-tests.sh with the tokens below) with a real
headless Chromium through Selenium (Debian's chromium + chromium-driver + python3-selenium;
nothing is downloaded) and scrapes it with a real Prometheus (Debian's prometheus):

  1. fixtures (ffmpeg) uploaded for alice; Prometheus started, scraping BASE/metrics every 1 s;
  2. render A (elicitation url+form declared): the url-mode request points at /approvals/<id>;
     the browser is sent to sign-in, signs in as alice, sees the preview at its real size,
     approves, and watches the page go to `succeeded` with a player; tasks/get agrees;
  3. render B: rejected with a note in the browser; tasks/get ends with watermark_rejected;
  4. render C (no elicitation declared, left waiting): the statusMessage names the approval
     page; a POST with alice's session cookie but no (or a wrong) csrf is refused with 403;
     bob, in a second browser, gets the same 404 page for C and for an unknown id, and his
     POST (with his own valid csrf) is refused with 404; C is still input_required;
  5. the dashboards of alice and bob list only their own renders;
  6. /metrics counts the outcomes, and Prometheus' query API sees the succeeded render;
  7. segment-parallel rendering: a 6 s 320x180 source with a tone and an IDR every second,
     rendered (mp4, 720p, no watermark) by a server that splits it (the runner starts it with
     --render-slots 2 --segment-min-duration 3s --segment-seconds 1s); /metrics shows
     vidforge_renders_split_total >= 1, and the result plays in Chromium from start to end
     (a muted <video> at a high playbackRate reaches `ended`, no `error`, and its currentTime
     reaches its duration).

Every wait is bounded in time and count. On failure it prints what it saw (page, server log)
and exits 1; a missing prerequisite (chromium, chromedriver, prometheus, selenium, ffmpeg) is a
failure too, never a skip. Screenshots (approval.png, approval-done.png, dashboard.png) go to
$VIDFORGE_SCREENSHOTS when set, else to WORK_DIR/screenshots.

Usage: /usr/bin/python3 tests/browser/ui_test.py BASE_URL WORK_DIR SERVER_LOG
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from task_render import TASKS, Mcp  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PROMETHEUS = "/usr/bin/prometheus"
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
    "--disable-sync", "--no-first-run", "--window-size=1400,1000",
]
# Chromium's highest playbackRate (a higher one throws NotSupportedError).
PLAYBACK_RATE = 16
# Must match the --token arguments scripts/run-ui-tests.sh starts the server with.
ALICE_TOKEN = "alice-secret-token"
BOB_TOKEN = "bob-secret-token"
ELICITING = {"extensions": {TASKS: {}}, "elicitation": {"form": {}, "url": {}}}
URL_KEY = "watermark-approval-page-1"
FORM_KEY = "watermark-approval-1"
UNKNOWN_ID = "task_01XXXXXXXXXXXXXXXXXXXXXXXX"
TERMINAL_TASK = ("completed", "failed", "cancelled")
TERMINAL_PAGE = ("succeeded", "failed", "cancelled")


class Failure(Exception):
    pass


def fail(why: str) -> None:
    raise Failure(why)


def ok(what: str) -> None:
    print(f"  ok: {what}", flush=True)


def wait_until(what: str, probe, timeout: float, interval: float = 0.2):
    """Calls probe() until it returns something truthy; bounded by time and by count."""
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(int(timeout / interval) + 2):
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    fail(f"timed out after {timeout:.0f} s waiting for {what}")


# ---------------------------------------------------------------- plain HTTP (no redirects)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def http(method: str, url: str, body: bytes | None = None,
         headers: dict | None = None, timeout: float = 60, follow: bool = False):
    """One request, redirects not followed unless `follow`: (status, headers, body)."""
    req = urllib.request.Request(url, body, headers or {}, method=method)
    opener = urllib.request.build_opener() if follow else _OPENER
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def form(fields: dict) -> bytes:
    return urllib.parse.urlencode(fields).encode()


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tail(path: str, lines: int = 60) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"({path}: {e})"


# ---------------------------------------------------------------- the test


class UiTest:
    def __init__(self, base: str, work: str, server_log: str) -> None:
        self.base = base.rstrip("/")
        self.origin = self.base
        self.work = work
        self.server_log = server_log
        self.shots = os.path.abspath(os.environ.get("VIDFORGE_SCREENSHOTS") or
                                     os.path.join(work, "screenshots"))
        self.drivers: dict[str, object] = {}
        self.prom: subprocess.Popen | None = None
        self.prom_log = os.path.join(work, "prometheus.log")
        self.prom_url = ""
        self.alice = Mcp(f"{self.base}/mcp", ALICE_TOKEN, "vidforge-ui-test", ELICITING)
        self.alice_plain = Mcp(f"{self.base}/mcp", ALICE_TOKEN, "vidforge-ui-test-plain")
        self.bob = Mcp(f"{self.base}/mcp", BOB_TOKEN, "vidforge-ui-test", ELICITING)

    # ------------------------------------------------------------ setup and teardown

    def check_prerequisites(self) -> None:
        missing = [p for p in (CHROMIUM, CHROMEDRIVER, PROMETHEUS) if not os.access(p, os.X_OK)]
        if shutil.which("ffmpeg") is None:
            missing.append("ffmpeg")
        if missing:
            fail(f"missing {', '.join(missing)}: run scripts/install-deps.sh "
                 "(Debian packages chromium chromium-driver prometheus ffmpeg)")
        if importlib.util.find_spec("selenium") is None:
            fail(f"selenium is not importable by {sys.executable}: install the Debian package "
                 "python3-selenium and run this with /usr/bin/python3")
        os.makedirs(self.shots, exist_ok=True)

    def new_browser(self, name: str):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in CHROMIUM_FLAGS:
            opts.add_argument(flag)
        profile = os.path.join(self.work, f"chromium-{name}")
        os.makedirs(profile, exist_ok=True)
        opts.add_argument(f"--user-data-dir={profile}")
        service = Service(CHROMEDRIVER, log_path=os.path.join(self.work, f"chromedriver-{name}.log"))
        try:
            driver = webdriver.Chrome(service=service, options=opts)
        except Exception as e:  # noqa: BLE001 (selenium raises many kinds)
            fail(f"headless Chromium did not start through {CHROMEDRIVER}: {e}")
        driver.set_page_load_timeout(60)
        driver.set_script_timeout(30)
        self.drivers[name] = driver
        return driver

    def start_prometheus(self) -> None:
        port = free_port()
        target = urllib.parse.urlsplit(self.base).netloc
        config = os.path.join(self.work, "prometheus.yml")
        with open(config, "w") as f:
            f.write(
                "global:\n"
                "  scrape_interval: 1s\n"
                "  scrape_timeout: 1s\n"
                "  evaluation_interval: 1s\n"
                "scrape_configs:\n"
                "  - job_name: vidforge\n"
                "    metrics_path: /metrics\n"
                "    static_configs:\n"
                f"      - targets: ['{target}']\n"
            )
        tsdb = os.path.join(self.work, "prometheus-data")
        os.makedirs(tsdb, exist_ok=True)
        with open(self.prom_log, "wb") as log:
            self.prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        with open(os.path.join(self.work, "prometheus.pid"), "w") as f:
            f.write(f"{self.prom.pid}\n")
        self.prom_url = f"http://127.0.0.1:{port}"

        def ready():
            if self.prom.poll() is not None:
                fail(f"prometheus exited with {self.prom.returncode}:\n{tail(self.prom_log)}")
            try:
                return http("GET", f"{self.prom_url}/-/ready", timeout=5)[0] == 200
            except OSError:
                return False
        wait_until("prometheus /-/ready", ready, 60, 0.25)
        ok(f"prometheus {self.prom_url} ready, scraping {target}/metrics every 1 s")

    def stop(self) -> None:
        for driver in self.drivers.values():
            try:
                driver.quit()
            except Exception:  # noqa: BLE001
                pass
        self.drivers.clear()
        if self.prom is not None and self.prom.poll() is None:
            self.prom.terminate()
            try:
                self.prom.wait(15)
            except subprocess.TimeoutExpired:
                self.prom.kill()
                self.prom.wait(5)

    def diagnose(self) -> None:
        for name, driver in self.drivers.items():
            try:
                print(f"--- browser {name}: {driver.current_url} (title {driver.title!r})",
                      file=sys.stderr)
                source = driver.page_source
                print(source[:4000] + ("\n[... cut]" if len(source) > 4000 else ""),
                      file=sys.stderr)
                driver.save_screenshot(os.path.join(self.shots, f"failure-{name}.png"))
            except Exception as e:  # noqa: BLE001
                print(f"(browser {name}: {e})", file=sys.stderr)
        print(f"--- server log tail ({self.server_log}):\n{tail(self.server_log)}", file=sys.stderr)
        if self.prom is not None:
            print(f"--- prometheus log tail:\n{tail(self.prom_log, 20)}", file=sys.stderr)

    # ------------------------------------------------------------ helpers

    def upload(self, path: str, token: str) -> str:
        with open(path, "rb") as f:
            data = f.read()
        name = urllib.parse.quote(os.path.basename(path))
        status, _, body = http("POST", f"{self.base}/assets?name={name}", data, {
            "Content-Type": "application/octet-stream", "Authorization": f"Bearer {token}"})
        if status not in (200, 201):
            fail(f"upload {path}: HTTP {status}: {body[:500]!r}")
        return json.loads(body)["uri"]

    def render(self, mcp: Mcp) -> str:
        args = {"source_asset_uri": self.clip, "output_format": "mp4", "resolution": "720p",
                "watermark": {"image_asset_uri": self.logo, "position": "bottom_right",
                              "opacity": 0.8}}
        created = mcp.call("tools/call", {"name": "vidforge_render_video", "arguments": args},
                           name="vidforge_render_video")
        if created.get("resultType") != "task" or not created.get("taskId"):
            fail(f"tools/call vidforge_render_video: expected a task, got {created}")
        return created["taskId"]

    def get_task(self, mcp: Mcp, task_id: str) -> dict:
        return mcp.call("tasks/get", {"taskId": task_id}, name=task_id)

    def wait_task(self, mcp: Mcp, task_id: str, want: str, timeout: float = 120) -> dict:
        seen: list[str] = []

        def probe():
            task = self.get_task(mcp, task_id)
            status = task.get("status")
            if not seen or seen[-1] != status:
                seen.append(status)
            if status == want:
                return task
            if status in TERMINAL_TASK:
                fail(f"task {task_id} ended {status} while waiting for {want}: {task}")
            return None
        task = wait_until(f"task {task_id} to be {want} (seen {seen})", probe, timeout, 0.2)
        return task

    def approval_path(self, task_id: str) -> str:
        return f"/approvals/{task_id}"

    def cookie_header(self, driver) -> str:
        cookie = driver.get_cookie("vidforge_session")
        if not cookie:
            fail(f"the browser has no vidforge_session cookie (cookies: {driver.get_cookies()})")
        return f"vidforge_session={cookie['value']}"

    def by_id(self, driver, element_id: str, timeout: float = 20):
        from selenium.webdriver.common.by import By
        return wait_until(f"#{element_id} on {driver.current_url}",
                          lambda: (driver.find_elements(By.ID, element_id) or [None])[0],
                          timeout, 0.1)

    def css(self, driver, selector: str):
        from selenium.webdriver.common.by import By
        return driver.find_elements(By.CSS_SELECTOR, selector)

    def path_of(self, driver) -> str:
        return urllib.parse.urlsplit(driver.current_url).path

    def shot(self, driver, name: str) -> None:
        """A screenshot of the whole page: the window is made as tall as the page (up to 4000
        px) for the shot, so that what sits below the 1000 px window (the decision form, the
        player) shows, painted as on screen (a video frame included), then put back."""
        path = os.path.join(self.shots, name)
        window = driver.get_window_size()
        inner, height = driver.execute_script(
            "return [window.innerHeight, Math.max(document.documentElement.scrollHeight, 1)];")
        tall = min(int(height), 4000)
        try:
            if tall > inner:
                driver.set_window_size(window["width"], window["height"] - inner + tall)
                time.sleep(0.5)  # the relayout and the player's repaint at the new size
            saved = driver.save_screenshot(path)
        finally:
            driver.set_window_size(window["width"], window["height"])
        if not saved:
            fail(f"could not save the screenshot {path}")
        ok(f"screenshot {path} (page {tall} px tall)")

    def sign_in(self, driver, token: str, next_path: str) -> None:
        """On the sign-in page (reached by a redirect to it): enter the token and submit."""
        from selenium.webdriver.common.by import By

        signin = self.by_id(driver, "signin")
        if (signin.get_attribute("method") or "").lower() != "post":
            fail(f"form#signin method is {signin.get_attribute('method')!r}, not post")
        if urllib.parse.urlsplit(signin.get_attribute("action") or "").path != "/signin":
            fail(f"form#signin action is {signin.get_attribute('action')!r}, not /signin")
        field = self.by_id(driver, "token")
        if field.get_attribute("type") != "password" or field.get_attribute("name") != "token":
            fail("input#token is not <input name=token type=password>")
        hidden = signin.find_elements(By.CSS_SELECTOR, 'input[name="next"]')
        if not hidden or hidden[0].get_attribute("type") != "hidden":
            fail("form#signin has no hidden `next` input")
        if hidden[0].get_attribute("value") != next_path:
            fail(f"form#signin next is {hidden[0].get_attribute('value')!r}, not {next_path!r}")
        field.clear()
        field.send_keys(token)
        self.by_id(driver, "signin-submit").click()

    def wait_path(self, driver, path: str, timeout: float = 30) -> None:
        wait_until(f"the browser to reach {path} (at {driver.current_url})",
                   lambda: self.path_of(driver) == path, timeout, 0.1)

    def metric_total(self, name: str) -> float | None:
        """The sum of every sample of the metric NAME in GET /metrics; None when it has none."""
        status, _, body = http("GET", f"{self.base}/metrics")
        if status != 200:
            fail(f"GET /metrics without credentials: HTTP {status}: {body[:300]!r}")
        values = [float(m.group(1)) for m in re.finditer(
            rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)$", body.decode(), re.MULTILINE)]
        return sum(values) if values else None

    def metrics(self) -> dict[str, float]:
        """vidforge_renders_finished_total by outcome, from GET /metrics (no credentials)."""
        status, headers, body = http("GET", f"{self.base}/metrics")
        if status != 200:
            fail(f"GET /metrics without credentials: HTTP {status}: {body[:300]!r}")
        ctype = headers.get("Content-Type", "")
        if not ctype.startswith("text/plain"):
            fail(f"GET /metrics Content-Type is {ctype!r}, not Prometheus text (text/plain)")
        out: dict[str, float] = {}
        for line in body.decode().splitlines():
            m = re.match(r'vidforge_renders_finished_total\{([^}]*)\}\s+(\S+)', line)
            if m:
                labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
                outcome = labels.get("outcome", "")
                out[outcome] = out.get(outcome, 0.0) + float(m.group(2))
        return out

    # ------------------------------------------------------------ the steps

    def fixtures(self) -> None:
        clip = os.path.join(self.work, "clip.mp4")
        logo = os.path.join(self.work, "logo.png")
        ff = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"]
        subprocess.run(ff + ["-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25:duration=1",
                             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=1",
                             "-c:a", "aac", "-b:a", "64k", "-c:v", "libx264", "-preset", "ultrafast",
                             "-pix_fmt", "yuv420p", "-shortest", clip], check=True, timeout=120)
        subprocess.run(ff + ["-f", "lavfi", "-i", "color=c=red@0.6:s=96x48,format=rgba",
                             "-frames:v", "1", logo], check=True, timeout=60)
        self.clip = self.upload(clip, ALICE_TOKEN)
        self.logo = self.upload(logo, ALICE_TOKEN)
        ok(f"fixtures uploaded for alice: {self.clip}, {self.logo}")
        self.bob_clip = self.upload(clip, BOB_TOKEN)
        self.bob_logo = self.upload(logo, BOB_TOKEN)
        ok("fixtures uploaded for bob")

    def approve_flow(self) -> None:
        a = self.render(self.alice)
        self.render_a = a
        task = self.wait_task(self.alice, a, "input_required")
        ok(f"render A {a}: input_required")
        requests = task.get("inputRequests") or {}
        if URL_KEY not in requests or FORM_KEY not in requests:
            fail(f"inputRequests (elicitation form+url declared) lacks {URL_KEY!r} or "
                 f"{FORM_KEY!r}: keys {sorted(requests)}")
        req = requests[URL_KEY]
        params = req.get("params") or {}
        url = params.get("url") or ""
        if req.get("method") != "elicitation/create" or params.get("mode") != "url":
            fail(f"{URL_KEY} is not a url-mode elicitation/create: {req}")
        if not params.get("message"):
            fail(f"{URL_KEY} has no message: {req}")
        if set(params) != {"mode", "message", "url"}:
            fail(f"{URL_KEY} params are not exactly mode, message, url (2026-07-28 has no "
                 f"elicitationId): {sorted(params)}")
        parts = urllib.parse.urlsplit(url)
        if not parts.path.endswith(self.approval_path(a)) or parts.query or parts.fragment \
                or parts.username or parts.password:
            fail(f"{URL_KEY} url {url!r} is not a bare .../approvals/{a}")
        if f"{parts.scheme}://{parts.netloc}" != self.origin:
            fail(f"{URL_KEY} url {url!r} is not on the server's origin {self.origin}")
        ok(f"inputRequests has {URL_KEY} (url {url}, no credential) and {FORM_KEY}")

        # Without a session: a redirect to sign-in that remembers where to go.
        status, headers, _ = http("GET", url)
        loc = urllib.parse.urlsplit(urllib.parse.urljoin(url, headers.get("Location", "")))
        nxt = urllib.parse.parse_qs(loc.query).get("next", [""])[0]
        if status != 303 or loc.path != "/signin" or nxt != self.approval_path(a):
            fail(f"GET {url} without a session: expected 303 to /signin?next={self.approval_path(a)}"
                 f", got {status} Location {headers.get('Location')!r}")
        ok(f"GET /approvals/<A> without a session: 303 to {headers.get('Location')}")

        # A wrong token: the form again with an error, 401.
        status, _, body = http("POST", f"{self.base}/signin",
                               form({"token": "not-a-token", "next": self.approval_path(a)}),
                               {"Content-Type": "application/x-www-form-urlencoded",
                                "Origin": self.origin})
        text = body.decode(errors="replace")
        if status != 401 or 'id="error"' not in text or 'id="signin"' not in text:
            fail(f"POST /signin with a wrong token: expected 401 with the form and #error, "
                 f"got {status}: {text[:600]}")
        ok("POST /signin with a wrong token: 401, the form again with #error")

        # The right token over plain HTTP: 303 to next with the session cookie's attributes.
        status, headers, body = http("POST", f"{self.base}/signin",
                                     form({"token": ALICE_TOKEN, "next": self.approval_path(a)}),
                                     {"Content-Type": "application/x-www-form-urlencoded",
                                      "Origin": self.origin})
        cookies = headers.get_all("Set-Cookie") or []
        session = [c for c in cookies if c.startswith("vidforge_session=")]
        loc = urllib.parse.urlsplit(headers.get("Location", ""))
        if status != 303 or loc.path != self.approval_path(a) or not session:
            fail(f"POST /signin with alice's token: expected 303 to {self.approval_path(a)} "
                 f"with vidforge_session, got {status} Location {headers.get('Location')!r} "
                 f"Set-Cookie {cookies}: {body[:300]!r}")
        attrs = [p.strip().lower() for p in session[0].split(";")[1:]]
        if "httponly" not in attrs or "samesite=strict" not in attrs:
            fail(f"the session cookie is not HttpOnly; SameSite=Strict: {session[0]!r}")
        ok("POST /signin with alice's token: 303 to next, vidforge_session HttpOnly SameSite=Strict")

        # The browser: the approval URL lands on sign-in; a wrong token first, then alice's.
        driver = self.new_browser("alice")
        ok(f"headless Chromium {driver.capabilities.get('browserVersion')} via {CHROMEDRIVER}")
        driver.get(url)
        self.wait_path(driver, "/signin")
        self.sign_in(driver, "not-a-token", self.approval_path(a))
        error = self.by_id(driver, "error")
        if error.get_attribute("role") != "alert" or not error.text.strip():
            fail(f"p#error is not role=alert with a message: {error.get_attribute('outerHTML')}")
        ok(f"browser: a wrong token shows #error ({error.text.strip()!r})")
        self.sign_in(driver, ALICE_TOKEN, self.approval_path(a))
        self.wait_path(driver, self.approval_path(a))
        ok("browser: approval URL -> sign-in -> signed in as alice -> back on the approval page")
        cookie = driver.get_cookie("vidforge_session")
        if not cookie or not cookie.get("httpOnly") or cookie.get("sameSite") != "Strict":
            fail(f"browser's vidforge_session cookie is not HttpOnly/SameSite=Strict: {cookie}")
        ok("browser holds vidforge_session (httpOnly, sameSite Strict)")

        self.check_approval_page(driver, a)
        self.shot(driver, "approval.png")

        self.by_id(driver, "approve").click()
        decision = self.by_id(driver, "decision", 30)
        if self.path_of(driver) != self.approval_path(a):
            fail(f"after approving the browser is at {driver.current_url}, not the approval page")
        ok(f"approved in the browser: #decision {decision.text.strip()!r}")
        state = self.wait_page_state(driver, 180)
        if state != "succeeded":
            fail(f"#state ended {state!r} after approving, not succeeded")
        ok("#state went live to succeeded")
        player = self.by_id(driver, "player", 20)
        if player.tag_name.lower() != "video":
            fail(f"#player is a <{player.tag_name}>, not a <video>")
        download = self.by_id(driver, "download", 20)
        href = download.get_attribute("href") or ""
        if download.tag_name.lower() != "a" or not href:
            fail(f"#download is not a link: {download.get_attribute('outerHTML')}")
        status, _, body = http("GET", urllib.parse.urljoin(driver.current_url, href),
                               headers={"Cookie": self.cookie_header(driver)}, follow=True)
        if status != 200 or body[4:8] != b"ftyp":
            fail(f"GET #download {href}: expected 200 with an MP4, got {status}, "
                 f"{len(body)} bytes starting {body[:16]!r}")
        ok(f"#player <video> and #download ({len(body)} bytes of MP4) present")
        self.wait_video_frame(driver)
        self.shot(driver, "approval-done.png")

        task = self.get_task(self.alice, a)
        result = task.get("result") or {}
        if task.get("status") != "completed" or result.get("isError") is True:
            fail(f"tasks/get A after approving: expected completed without isError, got {task}")
        ok("tasks/get A: completed, not an error")

    def check_approval_page(self, driver, task_id: str) -> None:
        from selenium.webdriver.common.by import By

        preview = self.by_id(driver, "preview")
        if preview.tag_name.lower() != "img":
            fail(f"#preview is a <{preview.tag_name}>, not an <img>")
        size = wait_until(
            "#preview to finish loading",
            lambda: (lambda r: r if r[0] and r[1] > 0 else None)(driver.execute_script(
                "const i = arguments[0]; return [i.complete, i.naturalWidth, i.naturalHeight];",
                preview)),
            30, 0.1)
        if (size[1], size[2]) != (1280, 720):
            fail(f"#preview natural size is {size[1]}x{size[2]}, not 1280x720 (720p from 16:9)")
        ok("#preview loaded at its natural size 1280x720")
        corner = self.by_id(driver, "corner")
        if corner.size.get("width", 0) <= 0 or corner.size.get("height", 0) <= 0:
            fail(f"#corner has no area: {corner.size}")
        params = self.by_id(driver, "params")
        text = params.text.lower()
        if params.tag_name.lower() != "dl" or "bottom" not in text \
                or not ("0.8" in text or "80" in text):
            fail(f"dl#params does not show the position and opacity: {params.text!r}")
        time_left = self.by_id(driver, "time-left")
        if not time_left.text.strip():
            fail("#time-left is empty")
        ok(f"#corner, #params ({' '.join(params.text.split())!r}) and #time-left "
           f"({time_left.text.strip()!r}) shown")
        decide = self.by_id(driver, "decide")
        action = urllib.parse.urlsplit(decide.get_attribute("action") or "").path
        if (decide.get_attribute("method") or "").lower() != "post" \
                or action != self.approval_path(task_id):
            fail(f"form#decide is not POST {self.approval_path(task_id)}: "
                 f"{decide.get_attribute('method')} {decide.get_attribute('action')}")
        csrf = decide.find_elements(By.CSS_SELECTOR, 'input[name="csrf"]')
        if not csrf or csrf[0].get_attribute("type") != "hidden" \
                or not csrf[0].get_attribute("value"):
            fail("form#decide has no hidden, non-empty csrf input")
        note = self.by_id(driver, "note")
        if note.tag_name.lower() != "textarea" or note.get_attribute("name") != "note":
            fail("#note is not <textarea name=note>")
        for button, value in (("approve", "approve"), ("reject", "reject")):
            b = self.by_id(driver, button)
            if b.tag_name.lower() != "button" or b.get_attribute("name") != "decision" \
                    or b.get_attribute("value") != value:
                fail(f"#{button} is not <button name=decision value={value}>: "
                     f"{b.get_attribute('outerHTML')}")
        ok("form#decide: POST to the page, hidden csrf, #note, #approve and #reject")

    def wait_page_state(self, driver, timeout: float) -> str:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By

        self.by_id(driver, "status")
        seen: list[str] = []

        def probe():
            try:
                els = driver.find_elements(By.CSS_SELECTOR, "#status #state")
                text = els[0].text.strip() if els else ""
            except StaleElementReferenceException:
                return None
            if text and (not seen or seen[-1] != text):
                seen.append(text)
            return text if text in TERMINAL_PAGE else None
        state = wait_until(f"#status #state to become terminal (seen {seen})", probe, timeout, 0.25)
        ok(f"#state on the page: {' -> '.join(seen)}")
        return state

    def wait_video_frame(self, driver) -> None:
        """Lets the player show a frame for the screenshot (with preload=metadata Chromium may
        show none: a seek to 0.5 s loads one). Not a check, as H.264 playback depends on the
        Chromium build; it only waits a bounded while and says what it got."""
        script = "const v = document.getElementById('player'); return v ? v.readyState : -1;"
        ready = -1
        for attempt in range(50):
            ready = driver.execute_script(script)
            if ready >= 2:
                break
            if attempt == 10:
                driver.execute_script(
                    "const v = document.getElementById('player'); if (v) v.currentTime = 0.5;")
            time.sleep(0.2)
        print(f"  (player readyState {ready} for the screenshot)", flush=True)

    def reject_flow(self) -> None:
        driver = self.drivers["alice"]
        b = self.render(self.alice)
        self.render_b = b
        self.wait_task(self.alice, b, "input_required")
        ok(f"render B {b}: input_required")
        # As from an agent's chat: a link on another site (here a data: page). The Strict
        # session cookie does not go with a cross-site navigation; the server answers with a
        # page that reloads itself once, same-site, and then the cookie goes along.
        link = f"{self.base}{self.approval_path(b)}"
        driver.get("data:text/html," + urllib.parse.quote(
            f'<a id="go" href="{link}">Review the watermark</a>'))
        self.by_id(driver, "go").click()
        self.wait_path(driver, self.approval_path(b))
        note = self.by_id(driver, "note")
        ok("a link from another site opens the approval page signed in (one same-site reload)")
        note.send_keys("The logo covers the timecode; please move it.")
        self.by_id(driver, "reject").click()
        decision = self.by_id(driver, "decision", 30)
        ok(f"rejected in the browser with a note (already signed in): #decision "
           f"{decision.text.strip()!r}")
        state = self.wait_page_state(driver, 60)
        if state == "succeeded":
            fail("#state says succeeded after a rejection")
        task = self.wait_task(self.alice, b, "completed", 60)
        result = task.get("result") or {}
        code = (result.get("structuredContent") or {}).get("code")
        if result.get("isError") is not True or code != "watermark_rejected":
            fail(f"tasks/get B after rejecting: expected isError with code watermark_rejected, "
                 f"got {task}")
        ok("tasks/get B: completed, isError, code watermark_rejected")

    def forgery_and_isolation(self) -> None:
        alice = self.drivers["alice"]
        c = self.render(self.alice_plain)
        self.render_c = c
        task = self.wait_task(self.alice_plain, c, "input_required")
        ok(f"render C {c} (no elicitation declared): input_required")
        requests = task.get("inputRequests") or {}
        if URL_KEY in requests or FORM_KEY in requests:
            fail(f"inputRequests without elicitation declared has {sorted(requests)}")
        message = task.get("statusMessage") or ""
        if f"{self.base}{self.approval_path(c)}" not in message \
                and self.approval_path(c) not in message:
            fail(f"statusMessage does not name /approvals/{c}: {message!r}")
        ok("no elicitation declared: no approval inputRequests, statusMessage names the page")

        # Forged POSTs with alice's session cookie: no csrf, then a wrong csrf.
        cookie = self.cookie_header(alice)
        url = f"{self.base}{self.approval_path(c)}"
        for label, fields in (("without csrf", {"decision": "approve"}),
                              ("with a wrong csrf", {"csrf": "forged", "decision": "approve"})):
            status, _, body = http("POST", url, form(fields), {
                "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie,
                "Origin": self.origin})
            if status != 403:
                fail(f"POST /approvals/<C> with alice's session {label} (same Origin): expected "
                     f"403, got {status}: {body[:400]!r}")
            ok(f"forged POST /approvals/<C> with alice's session {label}: 403")
        if self.get_task(self.alice_plain, c).get("status") != "input_required":
            fail("render C is no longer input_required after the forged POSTs")
        ok("render C still input_required after the forged POSTs")

        # Bob, in a second browser: his own render gives him a csrf of his own.
        bob = self.new_browser("bob")
        d = self.render_bob()
        bob.get(f"{self.base}{self.approval_path(c)}")
        self.wait_path(bob, "/signin")
        self.sign_in(bob, BOB_TOKEN, self.approval_path(c))
        self.wait_path(bob, self.approval_path(c))
        h1 = self.by_id(bob, "not-found")
        if h1.tag_name.lower() != "h1":
            fail(f"#not-found is a <{h1.tag_name}>, not an <h1>")
        seen_c = (h1.text.strip(), bob.title)
        ok(f"bob on alice's render C: #not-found ({h1.text.strip()!r})")
        bob.get(f"{self.base}{self.approval_path(UNKNOWN_ID)}")
        self.wait_path(bob, self.approval_path(UNKNOWN_ID))
        h1 = self.by_id(bob, "not-found")
        if (h1.text.strip(), bob.title) != seen_c:
            fail(f"the unknown id's 404 page differs from alice's render's: "
                 f"{(h1.text.strip(), bob.title)} vs {seen_c}")
        ok("bob on an unknown id: the same #not-found page")
        bob_cookie = self.cookie_header(bob)
        for target in (c, UNKNOWN_ID):
            status, _, _ = http("GET", f"{self.base}{self.approval_path(target)}",
                                headers={"Cookie": bob_cookie})
            if status != 404:
                fail(f"GET /approvals/{target} as bob: expected 404, got {status}")
        ok("GET /approvals/<C> and /approvals/<unknown> as bob: 404")

        bob.get(f"{self.base}{self.approval_path(d)}")
        self.wait_path(bob, self.approval_path(d))
        from selenium.webdriver.common.by import By
        csrf = self.by_id(bob, "decide").find_elements(By.CSS_SELECTOR, 'input[name="csrf"]')
        if not csrf or not csrf[0].get_attribute("value"):
            fail("bob's own approval page has no csrf")
        status, _, body = http("POST", url, form({"csrf": csrf[0].get_attribute("value"),
                                                  "decision": "approve"}), {
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": bob_cookie,
            "Origin": self.origin})
        if status != 404:
            fail(f"POST /approvals/<C> as bob with his own valid csrf: expected 404, got {status}: "
                 f"{body[:400]!r}")
        ok("POST /approvals/<C> as bob with his own valid csrf: 404")
        if self.get_task(self.alice_plain, c).get("status") != "input_required":
            fail("render C is no longer input_required after bob's POST")
        ok("render C still input_required after bob's POST")

        bob.get(f"{self.base}/")
        self.wait_path(bob, "/")
        self.by_id(bob, "renders")
        ids = {r.get_attribute("data-render-id") for r in self.css(bob, "#renders tr[data-render-id]")}
        if d not in ids or ids & {self.render_a, self.render_b, c}:
            fail(f"bob's dashboard rows {sorted(ids)}: expected his {d} and none of alice's")
        ok(f"bob's dashboard lists his render and none of alice's ({len(ids)} row(s))")

    def render_bob(self) -> str:
        args = {"source_asset_uri": self.bob_clip, "output_format": "mp4", "resolution": "720p",
                "watermark": {"image_asset_uri": self.bob_logo, "position": "bottom_right",
                              "opacity": 0.8}}
        created = self.bob.call("tools/call", {"name": "vidforge_render_video", "arguments": args},
                                name="vidforge_render_video")
        d = created.get("taskId")
        if created.get("resultType") != "task" or not d:
            fail(f"bob's tools/call: expected a task, got {created}")
        self.wait_task(self.bob, d, "input_required")
        ok(f"bob's render D {d}: input_required")
        return d

    def dashboard(self) -> None:
        driver = self.drivers["alice"]
        driver.get(f"{self.base}/")
        self.wait_path(driver, "/")
        table = self.by_id(driver, "renders")
        if table.tag_name.lower() != "table":
            fail(f"#renders is a <{table.tag_name}>, not a <table>")
        self.by_id(driver, "capabilities")
        if self.by_id(driver, "capabilities").tag_name.lower() != "section":
            fail("#capabilities is not a <section>")
        rows = {r.get_attribute("data-render-id"): r.get_attribute("data-state")
                for r in self.css(driver, "#renders tr[data-render-id]")}
        mine = [self.render_a, self.render_b, self.render_c]
        if any(r not in rows for r in mine):
            fail(f"alice's dashboard rows {rows}: expected A, B and C ({mine})")
        if any(not rows[r] for r in mine):
            fail(f"alice's dashboard rows lack data-state: {rows}")
        ok("alice's dashboard: #renders rows for A, B, C (" +
           ", ".join(f"{rows[r]}" for r in mine) + ") and #capabilities")
        self.shot(driver, "dashboard.png")

        # Live: a render created now shows up on the open page, then follows its decision
        # (taken through MCP) to the end, without a reload (the window's marker survives).
        driver.execute_script("window.vidforgeMarker = 'kept';")
        e = self.render(self.alice)
        row_state = ("const r = document.querySelector(`#renders tr[data-render-id='${arguments[0]}']`);"
                     " return r ? r.dataset.state : null;")
        wait_until(f"render E {e} to appear awaiting approval on the open dashboard",
                   lambda: driver.execute_script(row_state, e) == "awaiting_watermark_approval",
                   60, 0.25)
        ok(f"dashboard live: render E {e} appeared awaiting approval, no reload")
        self.alice.call("tasks/update", {"taskId": e, "inputResponses": {
            FORM_KEY: {"action": "accept", "content": {"approved": True}}}}, name=e)
        wait_until(f"render E {e} to read succeeded on the open dashboard",
                   lambda: driver.execute_script(row_state, e) == "succeeded", 120, 0.25)
        if driver.execute_script("return window.vidforgeMarker;") != "kept":
            fail("the dashboard reloaded instead of updating in place")
        ok("dashboard live: render E approved over MCP reads succeeded in place")

    def metrics_checks(self) -> None:
        counts = self.metrics()
        if counts.get("succeeded", 0) < 1 or counts.get("watermark_rejected", 0) < 1:
            fail(f"/metrics vidforge_renders_finished_total by outcome: {counts}; expected "
                 "succeeded >= 1 and watermark_rejected >= 1")
        ok(f"GET /metrics (no credentials): vidforge_renders_finished_total {counts}")

        query = 'sum(vidforge_renders_finished_total{outcome="succeeded"})'
        api = f"{self.prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        last: list = []

        def probe():
            status, _, body = http("GET", api, timeout=10)
            if status != 200:
                fail(f"prometheus query API: HTTP {status}: {body[:300]!r}")
            answer = json.loads(body)
            result = answer.get("data", {}).get("result", [])
            last[:] = [result]
            if result and float(result[0]["value"][1]) >= 1:
                return float(result[0]["value"][1])
            return None
        value = wait_until(f"prometheus to see {query} >= 1 (last {last})", probe, 60, 1.0)
        ok(f"prometheus: {query} = {value:g}")
        status, _, body = http("GET", f"{self.prom_url}/api/v1/query?" +
                               urllib.parse.urlencode({"query": 'up{job="vidforge"}'}))
        result = json.loads(body).get("data", {}).get("result", []) if status == 200 else []
        if not result or result[0]["value"][1] != "1":
            fail(f'prometheus up{{job="vidforge"}} is not 1: {result}')
        ok('prometheus: up{job="vidforge"} = 1')

    def segments_playback(self) -> None:
        """A render the server cuts into segments (a 6 s source, segments of 1 s, two slots)
        plays in Chromium from its first frame to its last."""
        src = os.path.join(self.work, "long.mp4")
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
                        "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25:duration=6",
                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                        "-g", "25", "-keyint_min", "25", "-sc_threshold", "0",
                        "-c:a", "aac", "-b:a", "64k", "-t", "6", src], check=True, timeout=120)
        uri = self.upload(src, ALICE_TOKEN)
        split_before = self.metric_total("vidforge_renders_split_total") or 0.0
        args = {"source_asset_uri": uri, "output_format": "mp4", "resolution": "720p"}
        created = self.alice_plain.call("tools/call", {"name": "vidforge_render_video",
                                                       "arguments": args},
                                        name="vidforge_render_video")
        f = created.get("taskId")
        if created.get("resultType") != "task" or not f:
            fail(f"tools/call vidforge_render_video (6 s source): expected a task, got {created}")
        task = self.wait_task(self.alice_plain, f, "completed", 120)
        result = task.get("result") or {}
        if result.get("isError") is True:
            fail(f"render F {f} (6 s source) completed with an error: {result}")
        ok(f"render F {f} (6 s 320x180 source, IDR every 1 s, 720p mp4): completed")

        split = self.metric_total("vidforge_renders_split_total")
        if split is None or split < 1 or split <= split_before:
            fail(f"/metrics vidforge_renders_split_total is {split} (before render F: "
                 f"{split_before}): render F was not split into segments")
        lines = [line for line in tail(self.server_log, 400).splitlines()
                 if f in line and ("segment" in line or "split" in line)]
        ok(f"/metrics vidforge_renders_split_total = {split:g}; the server log has "
           f"{len(lines)} segment line(s) for F")

        links = [c for c in result.get("content", []) if c.get("type") == "resource_link"]
        url = (links[0].get("_meta") or {}).get("com.vidforge/download_url") if links else None
        if not url:
            fail(f"render F's result has no download URL: {result}")
        if urllib.parse.urlsplit(url).netloc != urllib.parse.urlsplit(self.base).netloc:
            fail(f"render F's download URL {url} is not on {self.base}")
        driver = self.drivers["alice"]
        driver.get(f"{self.base}/")
        self.wait_path(driver, "/")
        # One bounded script: the <video> plays the result (alice's session cookie goes along,
        # same origin) and the script answers on `ended`, on `error` or when time is up.
        seen = driver.execute_async_script("""
            const [src, rate, limitMs, done] = arguments;
            const v = document.createElement('video');
            v.id = 'segments-player'; v.muted = true; v.preload = 'auto';
            const events = [];
            let answered = false;
            const finish = (why) => {
              if (answered) return;
              answered = true;
              const q = v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : {};
              done({why, events, currentTime: v.currentTime, duration: v.duration,
                    ended: v.ended, paused: v.paused, readyState: v.readyState,
                    networkState: v.networkState, width: v.videoWidth, height: v.videoHeight,
                    decodedFrames: q.totalVideoFrames, droppedFrames: q.droppedVideoFrames,
                    error: v.error ? {code: v.error.code, message: v.error.message} : null});
            };
            for (const e of ['loadedmetadata', 'canplay', 'playing', 'waiting', 'stalled',
                             'ended', 'error']) {
              v.addEventListener(e, () => events.push(e + '@' + v.currentTime.toFixed(3)));
            }
            v.addEventListener('loadedmetadata', () => {
              v.playbackRate = rate;
              v.play().catch((e) => finish('play() rejected: ' + e));
            });
            v.addEventListener('ended', () => finish('ended'));
            v.addEventListener('error', () => finish('error'));
            setTimeout(() => finish('timed out after ' + limitMs + ' ms'), limitMs);
            document.body.appendChild(v);
            v.src = src;
        """, url, PLAYBACK_RATE, 20000)
        if not isinstance(seen, dict):
            fail(f"the playback script answered {seen!r}")
        duration = seen.get("duration")
        current = seen.get("currentTime")
        if seen.get("why") != "ended" or seen.get("error") or not seen.get("ended"):
            fail(f"render F did not play to its end in Chromium: {seen}")
        if not isinstance(duration, (int, float)) or abs(duration - 6.0) > 0.1:
            fail(f"render F plays with duration {duration} in Chromium, not 6 s: {seen}")
        if not isinstance(current, (int, float)) or current < duration - 0.001:
            fail(f"render F's currentTime {current} at `ended` did not reach its duration "
                 f"{duration}: {seen}")
        if (seen.get("width"), seen.get("height")) != (1280, 720):
            fail(f"render F plays at {seen.get('width')}x{seen.get('height')}, not 1280x720: "
                 f"{seen}")
        ok(f"render F plays in Chromium to the end at {PLAYBACK_RATE}x: currentTime "
           f"{current:.3f} of {duration:.3f} s, 1280x720, no error "
           f"({seen.get('decodedFrames')} frames decoded; events {' '.join(seen['events'])})")

    def run(self) -> None:
        self.check_prerequisites()
        self.fixtures()
        self.start_prometheus()
        self.approve_flow()
        self.reject_flow()
        self.forgery_and_isolation()
        self.dashboard()
        self.metrics_checks()
        self.segments_playback()


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    # SIGTERM (e.g. from the runner's trap) unwinds through the cleanup below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    test = UiTest(*argv[1:])
    started = time.monotonic()
    try:
        test.run()
    except Failure as e:
        print(f"ui_test: FAIL: {e}", file=sys.stderr)
        test.diagnose()
        return 1
    except SystemExit:
        # task_render.Mcp reports a protocol error by exiting; add what we saw.
        test.diagnose()
        raise
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print(f"ui_test: FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        test.diagnose()
        return 1
    finally:
        test.stop()
    print(f"ui_test: all checks passed ({time.monotonic() - started:.0f} s); "
          f"screenshots in {test.shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
