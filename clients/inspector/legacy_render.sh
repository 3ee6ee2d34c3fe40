#!/usr/bin/env bash
# Drives vidforge with the MCP Inspector CLI (@modelcontextprotocol/inspector, pinned in
# package.json) in its default protocol era for an ad-hoc URL: legacy (an `initialize`-based
# session). Never passes --protocol-era: the default is the point. Each CLI call is its own
# session (initialize, one method, DELETE). Scenario, asserting on each JSON answer:
#   1. tools/list lists vidforge_render_video;
#   2. tools/call vidforge_render_video (mp4 720p, no watermark) answers accepted + render_id (a
#      task instead would mean a modern-era request: the CLI declares the tasks extension);
#   3. tools/call vidforge_get_render_status, polled (at most 120 tries, 0.5 s apart), until the
#      render succeeded with its video URI.
# Runs the inspector on the project-local Node 22 (npm `node` package; the inspector needs
# >= 22.19) from clients/inspector/node_modules (npm ci there first). JSON is parsed with python3.
#
# Usage: legacy_render.sh URL CLIP_URI
# Set VIDFORGE_TOKEN when the server requires bearer tokens (sent as --header).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 URL CLIP_URI" >&2
  exit 2
fi
URL="$1"
CLIP="$2"
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ -x "$DIR/node_modules/.bin/mcp-inspector" ] || { echo "inspector client: run npm ci in $DIR first" >&2; exit 2; }
# The launcher's shebang is `env node`: the lockfile's Node 22 first on PATH.
export PATH="$DIR/node_modules/.bin:$PATH"
# The CLI keeps a catalog and client config under ~/.mcp-inspector: a throwaway home instead.
HOME="$(mktemp -d)"
export HOME
trap 'rm -rf "$HOME"' EXIT

HEADERS=()
if [ -n "${VIDFORGE_TOKEN:-}" ]; then
  HEADERS=(--header "Authorization: Bearer $VIDFORGE_TOKEN")
fi

# One CLI call; prints its JSON answer ({"result": ...}) on stdout. Never starts interactive OAuth
# (--stored-auth-only; the throwaway home stores none): a missing token fails at once.
inspector() {
  mcp-inspector --cli "$URL" --format json --quiet --connect-timeout 15000 --stored-auth-only "${HEADERS[@]}" "$@"
}

ok() { echo "  ok: $1"; }
fail() {
  echo "inspector client: FAIL: $1; got: $2" >&2
  exit 1
}

echo "tools/list (default protocol era: legacy)"
tools="$(inspector --method tools/list)" || fail "tools/list answers" "exit $? (error above)"
names="$(printf '%s' "$tools" | python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)["result"]["tools"]))')" ||
  fail "tools/list answered no tool list" "$tools"
[[ " $names " == *" vidforge_render_video "* ]] || fail "tools/list has vidforge_render_video" "$names"
ok "tools/list has vidforge_render_video"

echo "render (mp4 720p, no watermark) through the fallback tools"
args="$(python3 -c 'import json,sys; print(json.dumps({"source_asset_uri": sys.argv[1], "output_format": "mp4", "resolution": "720p"}))' "$CLIP")"
accepted="$(inspector --method tools/call --tool-name vidforge_render_video --tool-args-json "$args")" ||
  fail "vidforge_render_video answers" "exit $? (error above)"
render_id="$(printf '%s' "$accepted" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
sc = r.get("structuredContent") or {}
assert not r.get("isError") and sc.get("status") == "accepted" and sc.get("render_id"), r
print(sc["render_id"])')" || fail "vidforge_render_video answers accepted + render_id" "$accepted"
ok "render accepted as $render_id"

state=""
for _ in $(seq 1 120); do
  status="$(inspector --method tools/call --tool-name vidforge_get_render_status --tool-arg "render_id=$render_id")" ||
    fail "vidforge_get_render_status answers" "exit $? (error above)"
  state="$(printf '%s' "$status" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
sc = r.get("structuredContent") or {}
assert not r.get("isError") and sc.get("render_id") == sys.argv[1], r
print(sc["state"] + (" terminal" if sc.get("terminal") else ""))' "$render_id")" ||
    fail "vidforge_get_render_status answers the render's status" "$status"
  case "$state" in
    *terminal) break ;;
  esac
  sleep 0.5
done
[ "$state" = "succeeded terminal" ] || fail "render succeeded within 120 polls" "$status"
video_uri="$(printf '%s' "$status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["structuredContent"].get("video_uri", ""))')"
[ "$video_uri" = "vidforge://videos/$render_id/final.mp4" ] || fail "status carries the video URI" "$status"
ok "render succeeded: $video_uri"
echo "inspector client: PASS"
