"""Connects to vidforge with nothing but its URL, by the official Python MCP SDK's own OAuth support.

The client (`mcp` 2.x, `mcp.client.auth.OAuthClientProvider` as the httpx2 auth of the transport)
starts with NO token. The SDK gets vidforge's `401`, reads the protected resource metadata (RFC 9728)
named by the challenge, discovers the authorization server (RFC 8414 / OpenID discovery), registers
itself (RFC 7591), runs the authorization-code flow with PKCE and `resource` (RFC 8707), and retries
with the token. Headless: the redirect handler follows the authorization URL with an HTTP client up
to the redirect to our own redirect_uri (never followed, only parsed for `code`, `state`, `iss`);
the authorization server of the tests signs in the account named by `login_hint` without a form.
Scenario:
  1. alice connects (the SDK's OAuth flow, checked request by request), lists the tools;
  2. the token the SDK obtained (from the in-memory storage): a JWT for vidforge's resource;
  3. an upload without a token is refused with the challenge; with the SDK's token it is accepted;
  4. render through the fallback tools: accepted -> poll -> succeeded;
  5. bob (a second client, second registration, login_hint=bob) can see neither alice's asset nor
     her render.
Every step asserts on what the servers sent; any failure exits non-zero.

Usage: python oauth_render.py MCP_URL CLIP_PATH
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2  # the SDK's HTTP client
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

WAIT_S = 180.0
# The client's own redirect URI (RFC 8252 loopback, native client): never listened on, the
# redirect to it is parsed, not followed.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"
MAX_HOPS = 12


def check(cond: bool, what: str, got: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}; got: {got!r}")
    print(f"  ok: {what}")


class MemoryStorage:
    """`mcp.client.auth.TokenStorage` in memory: the tokens and the registration of one client."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """The redirect and callback handlers of `OAuthClientProvider`: follows the authorization URL
    (with a cookie jar, as a browser would) until the authorization server redirects to
    REDIRECT_URI, and hands the `code`, `state` and `iss` found there back to the SDK."""

    def __init__(self, login_hint: str) -> None:
        self.login_hint = login_hint
        self.result: AuthorizationCodeResult | None = None
        self.authorization_urls: list[str] = []

    async def redirect(self, authorization_url: str) -> None:
        self.authorization_urls.append(authorization_url)
        # The SDK has no hook for extra authorization parameters; the user agent adds the
        # account to sign in (the test authorization server's automatic login reads it).
        url = f"{authorization_url}&{urlencode({'login_hint': self.login_hint})}"
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10.0) as http:
            for _ in range(MAX_HOPS):
                response = await http.get(url)
                location = response.headers.get("location")
                if response.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise AssertionError(
                        f"authorization stopped at {url}: HTTP {response.status_code} {response.text[:300]!r}"
                    )
                url = urljoin(url, location)
                if url.startswith(REDIRECT_URI):
                    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
                    if "error" in query:
                        raise AssertionError(f"authorization refused: {query}")
                    self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
                    return
        raise AssertionError(f"no redirect to {REDIRECT_URI} after {MAX_HOPS} hops; last: {url}")

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise AssertionError("the callback ran before the redirect reached the redirect URI")
        result, self.result = self.result, None
        return result


class OAuthUser:
    """One MCP client with its own OAuth registration and token, signing in as `login_hint`."""

    def __init__(self, mcp_url: str, login_hint: str) -> None:
        self.mcp_url = mcp_url
        self.storage = MemoryStorage()
        self.browser = HeadlessBrowser(login_hint)
        self.exchanges: list[tuple[str, str, int]] = []  # every request the HTTP client sent
        self.provider = OAuthClientProvider(
            server_url=mcp_url,
            client_metadata=OAuthClientMetadata(
                client_name=f"vidforge oauth_render.py ({login_hint})",
                redirect_uris=[REDIRECT_URI],
            ),
            storage=self.storage,
            redirect_handler=self.browser.redirect,
            callback_handler=self.browser.callback,
        )

    async def _record(self, response: httpx2.Response) -> None:
        request = response.request
        self.exchanges.append((request.method, str(request.url), response.status_code))

    @contextlib.asynccontextmanager
    async def transport(self) -> AsyncIterator[Any]:
        """Streamable HTTP with the SDK's OAuth provider as the HTTP client's auth."""
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(
            auth=self.provider, timeout=timeout, event_hooks={"response": [self._record]}
        ) as http:
            async with streamable_http_client(self.mcp_url, http_client=http) as streams:
                yield streams

    @property
    def token(self) -> str:
        """The access token the SDK obtained (kept in our TokenStorage)."""
        if self.storage.tokens is None:
            raise AssertionError("the SDK stored no access token")
        return self.storage.tokens.access_token


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified (vidforge verifies it; this only reads what was issued)."""
    parts = token.split(".")
    check(len(parts) == 3, "the access token is a JWT", token[:40])
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    return json.loads(base64.urlsafe_b64decode(payload))


def check_oauth_flow(user: OAuthUser, base: str) -> str:
    """Asserts the SDK ran the standard flow, request by request; returns the issuer it used."""
    seen = user.exchanges
    print("  requests: " + ", ".join(f"{m} {urlsplit(u).path or '/'} {s}" for m, u, s in seen))
    first = seen[0]
    check(first[1].startswith(user.mcp_url) and first[2] == 401, "the first MCP request (no token) got 401", first)
    prm = [e for e in seen if e[1] == f"{base}/.well-known/oauth-protected-resource/mcp"]
    check(bool(prm) and prm[0][2] == 200, "the SDK read the resource metadata named by the challenge", seen)
    issuer_meta = [e for e in seen if "/.well-known/o" in e[1] and not e[1].startswith(base) and e[2] == 200]
    check(bool(issuer_meta), "the SDK discovered the authorization server's metadata", seen)
    issuer = f"{urlsplit(issuer_meta[0][1]).scheme}://{urlsplit(issuer_meta[0][1]).netloc}"
    reg = [e for e in seen if e[0] == "POST" and e[1].startswith(issuer) and e[2] == 201]
    check(bool(reg), "the SDK registered itself dynamically", seen)
    token = [e for e in seen if e[0] == "POST" and e[1].startswith(f"{issuer}/token") and e[2] == 200]
    check(bool(token), "the SDK exchanged the code at the token endpoint", seen)
    after = [e for e in seen[seen.index(token[0]) + 1 :] if e[1].startswith(user.mcp_url)]
    check(bool(after) and after[0][2] in (200, 202), "the retried MCP request was accepted", after)
    urls = user.browser.authorization_urls
    check(len(urls) == 1, "one authorization request", urls)
    params = {k: v[0] for k, v in parse_qs(urlsplit(urls[0]).query).items()}
    check(params.get("code_challenge_method") == "S256" and bool(params.get("code_challenge")), "PKCE (S256)", params)
    check(params.get("resource") == user.mcp_url, "the authorization request names vidforge's resource", params)
    check("vidforge:render" in params.get("scope", "").split(), "the scope from the challenge was requested", params)
    return issuer


async def upload(http: httpx2.AsyncClient, base: str, clip: str, token: str | None) -> httpx2.Response:
    headers = {"Content-Type": "application/octet-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with open(clip, "rb") as f:
        body = f.read()
    return await http.post(f"{base}/assets", params={"name": os.path.basename(clip)}, content=body, headers=headers)


async def poll_status(client: Client, render_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        result = await client.call_tool("vidforge_get_render_status", {"render_id": render_id})
        if result.is_error or not isinstance(result.structured_content, dict):
            raise AssertionError(f"vidforge_get_render_status failed: {result}")
        status = result.structured_content
        if status.get("terminal"):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"render {render_id} never finished; last: {status}")
        await asyncio.sleep(0.2)


async def main(mcp_url: str, clip: str) -> None:
    base = mcp_url.rsplit("/mcp", 1)[0]
    alice = OAuthUser(mcp_url, "alice")
    async with Client(alice.transport(), mode="auto", read_timeout_seconds=60) as client:
        print("alice: connect with no token (the SDK's OAuth flow)")
        check(client.protocol_version == "2026-07-28", "negotiated 2026-07-28", client.protocol_version)
        issuer = check_oauth_flow(alice, base)
        tools = {t.name for t in (await client.list_tools()).tools}
        check({"vidforge_render_video", "vidforge_get_render_status"} <= tools, "tools/list has the render tools", sorted(tools))

        print("the token the SDK obtained")
        check(alice.storage.tokens is not None, "the SDK stored an access token", alice.storage.tokens)
        claims = jwt_claims(alice.token)
        check(claims.get("iss") == issuer, "issued by the discovered authorization server", claims)
        aud = claims.get("aud")
        check(mcp_url in (aud if isinstance(aud, list) else [aud]), "audience is vidforge's resource", claims)
        check(claims.get("sub") == "alice", "subject is alice", claims)
        check("vidforge:render" in str(claims.get("scope", "")).split(), "scope vidforge:render granted", claims)

        print("upload: refused without a token, accepted with the SDK's")
        async with httpx2.AsyncClient(timeout=30.0) as http:
            refused = await upload(http, base, clip, None)
            check(refused.status_code == 401, "upload without a token: 401", refused.status_code)
            challenge = refused.headers.get("www-authenticate", "")
            check(
                f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge,
                "the challenge names the resource metadata",
                challenge,
            )
            uploaded = await upload(http, base, clip, alice.token)
            check(uploaded.status_code == 201, "upload with the SDK's token: 201", (uploaded.status_code, uploaded.text))
            asset = uploaded.json()
            clip_uri = asset["uri"]

        print("render through the fallback tools")
        args = {"source_asset_uri": clip_uri, "output_format": "mp4", "resolution": "720p"}
        accepted = await client.call_tool("vidforge_render_video", args)
        check(not accepted.is_error and isinstance(accepted.structured_content, dict), "render accepted", accepted)
        sc = accepted.structured_content
        check(sc.get("status") == "accepted", "status is accepted", sc)
        render_id = sc["render_id"]
        done = await poll_status(client, render_id)
        check(done.get("state") == "succeeded", "render succeeded", done)
        check(done.get("video_uri") == f"vidforge://videos/{render_id}/final.mp4", "video URI returned", done)
        check(len(alice.browser.authorization_urls) == 1, "no second authorization while rendering", alice.browser.authorization_urls)

    print("bob: his own registration and token; alice's asset and render are not his")
    bob = OAuthUser(mcp_url, "bob")
    async with Client(bob.transport(), mode="auto", read_timeout_seconds=60) as client:
        check_oauth_flow(bob, base)
        bob_claims = jwt_claims(bob.token)
        check(bob_claims.get("sub") == "bob", "subject is bob", bob_claims)
        check(bob.storage.client_info.client_id != alice.storage.client_info.client_id, "bob registered his own client")  # type: ignore[union-attr]
        status = await client.call_tool("vidforge_get_render_status", {"render_id": render_id})
        check(status.is_error, "bob cannot read alice's render", status)
        async with httpx2.AsyncClient(timeout=30.0) as http:
            theirs = await http.get(f"{base}/assets/{asset['asset_id']}", headers={"Authorization": f"Bearer {bob.token}"})
            check(theirs.status_code == 404, "bob cannot see alice's asset: 404", theirs.status_code)
            mine = await http.get(f"{base}/assets/{asset['asset_id']}", headers={"Authorization": f"Bearer {alice.token}"})
            check(mine.status_code == 200, "alice still sees her asset", mine.status_code)
    print("python oauth client: PASS")


def root_causes(exc: BaseException) -> list[BaseException]:
    """The leaves of an exception group (anyio task groups wrap the error that matters)."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (list, tuple)) and inner:
        return [leaf for e in inner for leaf in root_causes(e)]
    return [exc]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), timeout=WAIT_S + 60))
    except Exception as exc:  # one clear line for CI, then the traceback
        why = "; ".join(f"{type(e).__name__}: {e}" for e in root_causes(exc))
        print(f"python oauth client: FAIL: {why}", file=sys.stderr)
        raise
