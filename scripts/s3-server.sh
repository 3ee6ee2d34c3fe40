#!/usr/bin/env bash
# The S3-compatible server of the media-store tests and of `scripts/cluster.sh` with
# VIDFORGE_CLUSTER_MEDIA=s3: moto's server (PyPI, pinned in tests/s3/requirements.txt) on
# loopback, in a venv at tests/s3/.venv. See docs/cluster.md ("Media in a bucket") for how it
# differs from AWS S3.
#
#   scripts/s3-server.sh install                 the venv (idempotent; the tests call it too)
#   scripts/s3-server.sh start DIR PORT BUCKET   start on 127.0.0.1:PORT (pid DIR/s3.pid, log
#                                                DIR/s3.log), wait until it answers, make BUCKET
#   scripts/s3-server.sh stop DIR                stop it
#
# Credentials: any key pair works (moto does not check signatures); the scripts use
# AWS_ACCESS_KEY_ID=vidforge-test, AWS_SECRET_ACCESS_KEY=vidforge-test-secret.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
S3="$ROOT/tests/s3"
VENV="$S3/.venv"

die() { echo "s3-server: $*" >&2; exit 1; }

# shellcheck source=lib/test_deps.sh
source "$ROOT/scripts/lib/test_deps.sh"
install() { py_venv "$S3"; }

case "${1:-}" in
  install)
    install
    ;;
  start)
    [ $# -eq 4 ] || die "usage: start DIR PORT BUCKET"
    dir="$2" port="$3" bucket="$4"
    install
    mkdir -p "$dir"
    nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$port" >"$dir/s3.log" 2>&1 </dev/null &
    echo $! >"$dir/s3.pid"
    for _ in $(seq 1 100); do
      if curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$port/moto-api/"; then
        curl -fsS -o /dev/null --max-time 5 -X PUT "http://127.0.0.1:$port/$bucket" \
          || die "cannot create bucket $bucket"
        echo "s3-server: http://127.0.0.1:$port, bucket $bucket (log $dir/s3.log)"
        exit 0
      fi
      sleep 0.2
    done
    die "no answer on 127.0.0.1:$port within 20 s; see $dir/s3.log"
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: stop DIR"
    if [ -f "$2/s3.pid" ]; then
      kill "$(cat "$2/s3.pid")" 2>/dev/null || true
      rm -f "$2/s3.pid"
    fi
    ;;
  *)
    die "usage: $0 install | start DIR PORT BUCKET | stop DIR"
    ;;
esac
