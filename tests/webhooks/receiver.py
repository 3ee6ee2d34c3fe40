#!/usr/bin/env python3
"""A real webhook receiver for vidforge's tests: verifies every delivery with the official
Standard Webhooks library (PyPI `standardwebhooks`) and records what it got.

    receiver.py --port PORT --secret whsec_...

POST /hook        a delivery: verified (401 if the signature, id or timestamp is wrong), then
                  answered as the current mode says:
                    ok      204 and recorded
                    fail    503 (counted as an attempt, not recorded as delivered)
                    hang    never answers within the sender's timeout (sleeps 600 s)
                    redirect 307 to /elsewhere (a sender must not follow it)
POST /mode?m=M    sets the mode
GET  /deliveries  {"delivered": [{id, type, data, at}, ...] in arrival order (duplicates kept),
                   "attempts": N, "invalid": N, "elsewhere": N}
GET  /elsewhere   counts requests that followed a redirect

Prints "receiver listening on PORT" once it serves. Loopback only.
"""
import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from standardwebhooks.webhooks import Webhook

MAX_BODY = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--secret", required=True)
    args = ap.parse_args()
    verifier = Webhook(args.secret)
    lock = threading.Lock()
    state = {"mode": "ok", "delivered": [], "attempts": 0, "invalid": 0, "elsewhere": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, code, body=b"", headers=()):
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = urlparse(self.path).path
            if path == "/deliveries":
                with lock:
                    body = json.dumps({k: state[k] for k in ("delivered", "attempts", "invalid", "elsewhere")})
                self.reply(200, body.encode(), [("Content-Type", "application/json")])
            elif path == "/elsewhere":
                with lock:
                    state["elsewhere"] += 1
                self.reply(200)
            else:
                self.reply(404)

        def do_POST(self):
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.reply(413)
                return
            body = self.rfile.read(length)
            if url.path == "/mode":
                with lock:
                    state["mode"] = parse_qs(url.query)["m"][0]
                self.reply(204)
                return
            if url.path == "/elsewhere":
                with lock:
                    state["elsewhere"] += 1
                self.reply(204)
                return
            if url.path != "/hook":
                self.reply(404)
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                payload = verifier.verify(body, headers)
            except Exception as e:  # WebhookVerificationError and malformed input alike
                with lock:
                    state["invalid"] += 1
                self.reply(401, str(e).encode())
                return
            with lock:
                state["attempts"] += 1
                mode = state["mode"]
            if mode == "fail":
                self.reply(503)
            elif mode == "hang":
                time.sleep(600)
                self.reply(204)
            elif mode == "redirect":
                self.reply(307, headers=[("Location", "/elsewhere")])
            else:
                with lock:
                    state["delivered"].append({
                        "id": headers["webhook-id"],
                        "type": payload["type"],
                        "timestamp": payload["timestamp"],
                        "data": payload["data"],
                        "at": time.time(),
                    })
                self.reply(204)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"receiver listening on {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
