#!/usr/bin/env bash
# A local vidforge cluster on this machine: a private PostgreSQL 15, N `vidforge serve` nodes on
# loopback ports sharing that store and one media dir (or, with VIDFORGE_CLUSTER_MEDIA=s3, an
# S3-compatible bucket and nothing else: each node keeps only its own data dir), and a private
# nginx on 127.0.0.1 that balances every request round-robin across the nodes
# (deploy/nginx.conf.template).
#
#   scripts/cluster.sh up              start it all, print the MCP URL and token(s) (make cluster)
#   scripts/cluster.sh down [--purge]  stop it all; --purge also deletes the state dir
#   scripts/cluster.sh status          which parts run (exit 0: all, 3: none, 1: some)
#   scripts/cluster.sh node-start I    start node I again (after node-kill), wait until healthy
#   scripts/cluster.sh node-kill I     kill -9 node I
#   scripts/cluster.sh pg-restart      pg_ctl restart -m fast
#   scripts/cluster.sh pg-stop         pg_ctl stop -m fast (an outage until pg-start)
#   scripts/cluster.sh pg-start        start PostgreSQL again after pg-stop
#
# Environment (all optional):
#   VIDFORGE_CLUSTER_DIR   state dir (default ./vidforge-cluster in the repository)
#   VIDFORGE_BIN           vidforge binary (default ./target/release/vidforge in the repository)
#   VIDFORGE_NODES         node count (default 3)
#   VIDFORGE_CLUSTER_PORT  gateway port on 127.0.0.1 (default 8090); nodes and PostgreSQL get
#                          free loopback ports
#   VIDFORGE_CLUSTER_TOKENS  token=principal[,token=principal...]; default: one random token for
#                          principal `agent`, kept in STATE/tokens for the next `up`
#   VIDFORGE_CLUSTER_ARGS  extra `vidforge serve` arguments for every node (split on spaces)
#   VIDFORGE_CLUSTER_WAIT  seconds to wait for the nodes to answer /healthz (default 60)
#   VIDFORGE_CLUSTER_CPUS  CPU list such as `0,1`: node I runs under `taskset -c` with the
#                          ((I-1) mod count)-th CPU of the list (0,1: node1 on 0, node2 on 1,
#                          node3 on 0), so nodes pinned to their own cores stand in for machines;
#                          default: no pinning (PostgreSQL, nginx and S3 are never pinned)
#   VIDFORGE_CLUSTER_MEDIA `dir` (default: one media dir every node shares) or `s3`: a private
#                          S3-compatible server (scripts/s3-server.sh, moto) on a free loopback
#                          port, bucket `vidforge`, media under s3://vidforge/cluster
#   VIDFORGE_PG_BIN        PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   RUST_LOG               node log level (default info)
#
# State dir: pg/ (PostgreSQL data), pg.log, pg-run/ (its unix socket), media/ (shared assets,
# previews, results; with s3: s3.log and s3.pid of the S3 server), nodeI/ (per-node data dir), nodeI.log, nodeI.pid, vidforge.toml (tokens),
# nginx.conf, nginx.pid, nginx-error.log, nginx-access.log (which node served each request),
# and cluster.env: everything above as NAME='value' lines for scripts and tests
# (`set -a; . STATE/cluster.env; set +a`). As root, PostgreSQL runs as the `postgres` user
# (it refuses root) and nginx's workers as nobody; otherwise everything runs as the caller.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "${1#./}" ;; esac; }

STATE="$(abspath "${VIDFORGE_CLUSTER_DIR:-$ROOT/vidforge-cluster}")"
STATE="${STATE%/}"
ENV_FILE="$STATE/cluster.env"
MARKER="$STATE/.vidforge-cluster"
PG_BIN="${VIDFORGE_PG_BIN:-/usr/lib/postgresql/15/bin}"
# PostgreSQL's files: in the state dir, unless we are root and the `postgres` user cannot reach
# it (a checkout under /root, a mktemp dir): then in a directory of their own under /var/tmp,
# named after the state dir (so `down` and `status` find it again).
PG_HOME="$STATE"
if [ "$(id -u)" -eq 0 ] && getent passwd postgres >/dev/null \
  && ! (cd / && runuser -u postgres -- test -x "$(dirname "$STATE")") 2>/dev/null; then
  PG_HOME="/var/tmp/vidforge-cluster-$(printf '%s' "$STATE" | sha256sum | cut -c1-16)"
fi
PG_DATA="$PG_HOME/pg"
PG_LOG="$PG_HOME/pg.log"
PG_SOCK="$PG_HOME/pg-run"
NGINX_CONF="$STATE/nginx.conf"
NGINX_PID_FILE="$STATE/nginx.pid"
NGINX_ERROR_LOG="$STATE/nginx-error.log"
TEMPLATE="$ROOT/deploy/nginx.conf.template"
# Per upstream server: after one failed connect or timeout, skip the node for 5 s.
UPSTREAM_PARAMS="max_fails=1 fail_timeout=5s"

log() { printf 'cluster: %s\n' "$*"; }
warn() { printf 'cluster: %s\n' "$*" >&2; }
die() { warn "error: $*"; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
tail_log() { # FILE: its last lines, indented, on stderr
  [ -f "$1" ] || return 0
  warn "--- last lines of $1:"
  tail -n 40 "$1" | sed 's/^/  | /' >&2 || true
}
find_cmd() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || return 1; }
hcurl() { curl -fsS -o /dev/null --noproxy '*' --max-time 2 "$@" 2>/dev/null; }

# PostgreSQL refuses to run as root: then its commands run as the `postgres` user.
as_pg() {
  if is_root; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# PID: whether any thread of the process still runs. Not the main thread alone: after SIGKILL
# it can be a zombie while other threads are still on their way out (one in an fsync or a GPU
# call), and the process's sockets stay open until the last thread has gone. A gateway sending
# to such a socket gets a reset after its request went out, which it cannot retry (a 502).
is_running() {
  local pid="$1" stat
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  for stat in /proc/"$pid"/task/*/stat; do
    stat="$(cat "$stat" 2>/dev/null)" || continue
    stat="${stat##*) }"
    [ "${stat%% *}" = Z ] || return 0
  done
  return 1
}

# FILE PATTERN: prints the pid in FILE when that process runs and its command line contains
# PATTERN (so a stale pid file never makes us signal someone else's process).
owned_pid() {
  local file="$1" pattern="$2" pid cmd
  [ -f "$file" ] || return 1
  pid="$(head -n 1 "$file" 2>/dev/null)" || return 1
  is_running "$pid" || return 1
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmd" == *"$pattern"* ]] || return 1
  printf '%s\n' "$pid"
}

node_pid() { owned_pid "$STATE/node$1.pid" "--data-dir $STATE/node$1 "; }
nginx_pid() { owned_pid "$NGINX_PID_FILE" "$NGINX_CONF"; }
pg_running() { [ -f "$PG_DATA/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1; }

# The node numbers that have a pid file in STATE.
node_ids() {
  local f n
  for f in "$STATE"/node*.pid; do
    [ -e "$f" ] || continue
    n="${f##*/node}"
    n="${n%.pid}"
    [[ "$n" =~ ^[0-9]+$ ]] && echo "$n"
  done
  return 0
}

# Waits (at most SECONDS) until PID is gone.
wait_gone() {
  local pid="$1" deadline=$((SECONDS + $2))
  while is_running "$pid"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # single-quoted for the shell

load_env() {
  [ -f "$ENV_FILE" ] || die "no $ENV_FILE: is the cluster up? (scripts/cluster.sh up)"
  # shellcheck disable=SC1090
  . "$ENV_FILE"
}

# ---------------------------------------------------------------------------------------------
# Nodes

start_node() { # I: starts node I in the background (variables from cluster.env / up)
  local i="$1" port extra=() pin=()
  port="$(echo "$NODE_PORTS" | cut -d' ' -f"$i")"
  [ -n "$port" ] || die "no port for node $i (NODE_PORTS=$NODE_PORTS)"
  read -r -a extra <<<"${VIDFORGE_CLUSTER_ARGS:-}"
  if [ -n "${VIDFORGE_CLUSTER_CPUS:-}" ]; then
    pin=(taskset -c "$(node_cpu "$i")")
  fi
  local media=(--media-store "$MEDIA_DIR")
  if [ "${VIDFORGE_CLUSTER_MEDIA:-dir}" = s3 ]; then
    media=(--media-store "s3://vidforge/cluster" --s3-endpoint "http://127.0.0.1:$S3_PORT")
  fi
  mkdir -p "$STATE/node$i"
  echo "=== $(date -u +%FT%TZ) node$i starting on 127.0.0.1:$port${pin[*]:+ (${pin[*]})}" >>"$STATE/node$i.log"
  # setsid: the node leaves the caller's process group (a Ctrl-C there does not reach it).
  # Errors without a backtrace (panics keep theirs): the log tail shows what went wrong.
  RUST_LOG="${RUST_LOG:-info}" RUST_LIB_BACKTRACE=0 \
    AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-vidforge-test}" \
    AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-vidforge-test-secret}" \
    AWS_REGION="${AWS_REGION:-us-east-1}" \
    setsid "${pin[@]+"${pin[@]}"}" "$VIDFORGE_CLUSTER_BIN" serve \
    --listen "127.0.0.1:$port" \
    --data-dir "$STATE/node$i" \
    "${media[@]}" \
    --store "$PG_URL" \
    --node-id "node$i" \
    --config "$VIDFORGE_CLUSTER_CONFIG" \
    --public-base-url "$VIDFORGE_CLUSTER_URL" \
    --allowed-host "127.0.0.1:$VIDFORGE_CLUSTER_PORT,localhost:$VIDFORGE_CLUSTER_PORT" \
    --trusted-proxy 127.0.0.1 \
    "${extra[@]}" </dev/null >>"$STATE/node$i.log" 2>&1 &
  echo "$!" >"$STATE/node$i.pid"
}

node_cpu() { # I: the CPU of VIDFORGE_CLUSTER_CPUS node I is pinned to
  local cpus
  IFS=, read -r -a cpus <<<"$VIDFORGE_CLUSTER_CPUS"
  echo "${cpus[($1 - 1) % ${#cpus[@]}]}"
}

wait_nodes() { # I...: waits until each node answers /healthz; fails (with its log) if one exits
  local deadline=$((SECONDS + ${VIDFORGE_CLUSTER_WAIT:-60})) pending=("$@") left i port pid
  while [ "${#pending[@]}" -gt 0 ]; do
    left=()
    for i in "${pending[@]}"; do
      port="$(echo "$NODE_PORTS" | cut -d' ' -f"$i")"
      if hcurl "http://127.0.0.1:$port/healthz"; then
        continue
      fi
      if ! pid="$(node_pid "$i")"; then
        warn "node$i exited during start-up"
        tail_log "$STATE/node$i.log"
        return 1
      fi
      left+=("$i")
    done
    pending=("${left[@]+"${left[@]}"}")
    [ "${#pending[@]}" -gt 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      for i in "${pending[@]}"; do
        warn "node$i did not answer /healthz within ${VIDFORGE_CLUSTER_WAIT:-60} s"
        tail_log "$STATE/node$i.log"
      done
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL

pg_start() { # PORT
  local port="$1" sock="$PG_SOCK" sockdir
  mkdir -p "$PG_DATA" "$sock"
  [ "$PG_HOME" = "$STATE" ] || chmod 755 "$PG_HOME"
  touch "$PG_LOG"
  if is_root; then
    getent passwd postgres >/dev/null || die "running as root needs the postgres user (apt-get install postgresql)"
    chown postgres:postgres "$PG_DATA" "$sock" "$PG_LOG"
  fi
  chmod 700 "$PG_DATA"
  if [ ! -s "$PG_DATA/PG_VERSION" ]; then
    log "initdb $PG_DATA"
    if ! as_pg "$PG_BIN/initdb" -D "$PG_DATA" --auth=trust -U vidforge -E UTF8 --no-locale >"$STATE/initdb.log" 2>&1; then
      tail_log "$STATE/initdb.log"
      die "initdb failed (as root the postgres user must be able to reach $STATE)"
    fi
    echo "include_if_exists = 'cluster.conf'   # written by scripts/cluster.sh" >>"$PG_DATA/postgresql.conf"
  fi
  # A unix socket path longer than 107 bytes cannot be bound: then TCP only.
  sockdir="$sock"
  [ "${#sock}" -le 90 ] || sockdir=""
  cat >"$PG_DATA/cluster.conf" <<EOF
# Written by scripts/cluster.sh up: loopback only, this cluster's port and socket dir.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sockdir'
max_connections = 200
EOF
  is_root && chown postgres:postgres "$PG_DATA/cluster.conf"
  log "PostgreSQL on 127.0.0.1:$port"
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 -s start; then
    tail_log "$PG_LOG"
    die "PostgreSQL did not start"
  fi
  local have
  have="$("$PG_BIN/psql" -h 127.0.0.1 -p "$port" -U vidforge -d postgres -tAqc \
    "select 1 from pg_database where datname = 'vidforge'")" || { tail_log "$PG_LOG"; die "psql cannot connect"; }
  if [ "$have" != 1 ]; then
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U vidforge vidforge || die "createdb vidforge failed"
  fi
}

pg_stop() {
  [ -f "$PG_DATA/postmaster.pid" ] || return 0
  if pg_running; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 -s stop ||
      as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 10 -s stop ||
      warn "PostgreSQL did not stop"
  fi
}

# ---------------------------------------------------------------------------------------------
# nginx

render_nginx_conf() { # GATEWAY_PORT NODE_PORT...
  local gw="$1" ups="" user p conf
  shift
  for p in "$@"; do ups+="        server 127.0.0.1:$p $UPSTREAM_PARAMS;"$'\n'; done
  ups="${ups%$'\n'}"
  if is_root; then user="user nobody nogroup;"; else user="# (not root: the workers run as $(id -un))"; fi
  conf="$(cat "$TEMPLATE")"
  conf="${conf//@STATE@/"$STATE"}"
  conf="${conf//@GATEWAY_PORT@/"$gw"}"
  conf="${conf//@UPSTREAMS@/"$ups"}"
  conf="${conf//@USER@/"$user"}"
  printf '%s\n' "$conf" >"$NGINX_CONF"
}

nginx_start() {
  local nginx pid deadline
  nginx="$NGINX_BIN"
  mkdir -p "$STATE/nginx-tmp"
  echo "=== $(date -u +%FT%TZ) cluster.sh up" >>"$NGINX_ERROR_LOG"
  if ! "$nginx" -t -q -c "$NGINX_CONF" -p "$STATE/" 2>>"$NGINX_ERROR_LOG"; then
    tail_log "$NGINX_ERROR_LOG"
    die "nginx -t rejected $NGINX_CONF"
  fi
  log "nginx gateway on 127.0.0.1:$VIDFORGE_CLUSTER_PORT"
  if ! "$nginx" -c "$NGINX_CONF" -p "$STATE/" 2>>"$NGINX_ERROR_LOG"; then
    tail_log "$NGINX_ERROR_LOG"
    die "nginx did not start"
  fi
  deadline=$((SECONDS + 15))
  until hcurl "$VIDFORGE_CLUSTER_URL/healthz"; do
    if [ "$SECONDS" -ge "$deadline" ] || ! pid="$(nginx_pid)"; then
      tail_log "$NGINX_ERROR_LOG"
      die "the gateway $VIDFORGE_CLUSTER_URL/healthz does not answer"
    fi
    sleep 0.2
  done
}

nginx_stop() {
  local pid kids
  pid="$(nginx_pid)" || { rm -f "$NGINX_PID_FILE"; return 0; }
  kids="$(pgrep -P "$pid" || true)"
  kill -TERM "$pid" 2>/dev/null || true # fast shutdown: open SSE streams are cut
  if ! wait_gone "$pid" 10; then
    warn "nginx (pid $pid) ignored SIGTERM; killing it"
    # shellcheck disable=SC2086
    kill -KILL "$pid" $kids 2>/dev/null || true
    wait_gone "$pid" 5 || true
  fi
  rm -f "$NGINX_PID_FILE"
}

# ---------------------------------------------------------------------------------------------
# Commands

# 0: gateway, every node and PostgreSQL run; 3: none does; 1: some. A subshell: reading
# cluster.env here must not change the caller's variables.
cmd_status() (
  local quiet="${1:-}" up=0 down=0 i pid port url
  say() { [ -n "$quiet" ] || printf '%-10s %s\n' "$1" "$2"; }
  if [ -f "$ENV_FILE" ]; then
    # shellcheck disable=SC1090
    . "$ENV_FILE"
  fi
  if pid="$(nginx_pid)"; then
    url="${VIDFORGE_CLUSTER_URL:-}"
    if [ -n "$url" ] && hcurl "$url/healthz"; then say gateway "running (pid $pid), $url/healthz ok"; else say gateway "running (pid $pid), /healthz not answering"; fi
    up=$((up + 1))
  else
    say gateway "stopped"
    down=$((down + 1))
  fi
  local ids
  ids="$( (node_ids; [ -n "${VIDFORGE_NODES:-}" ] && seq 1 "$VIDFORGE_NODES") | sort -nu)"
  for i in $ids; do
    if pid="$(node_pid "$i")"; then
      port="$(echo "${NODE_PORTS:-}" | cut -d' ' -f"$i")"
      if [ -n "$port" ] && hcurl "http://127.0.0.1:$port/healthz"; then
        say "node$i" "running (pid $pid), http://127.0.0.1:$port/healthz ok"
      else
        say "node$i" "running (pid $pid), /healthz not answering"
      fi
      up=$((up + 1))
    else
      say "node$i" "stopped"
      down=$((down + 1))
    fi
  done
  if pg_running; then say postgres "running, ${PG_URL:-$PG_DATA}"; up=$((up + 1)); else say postgres "stopped"; down=$((down + 1)); fi
  if [ "$down" -eq 0 ] && [ -f "$ENV_FILE" ]; then return 0; fi
  if [ "$up" -eq 0 ]; then return 3; fi
  return 1
)

cmd_down() {
  local purge="${1:-}" i pid pids=() deadline
  [ -d "$STATE" ] || { log "nothing to stop ($STATE does not exist)"; return 0; }
  nginx_stop
  for i in $(node_ids); do
    if pid="$(node_pid "$i")"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  deadline=$((SECONDS + 20))
  for pid in "${pids[@]+"${pids[@]}"}"; do
    if ! wait_gone "$pid" $((deadline > SECONDS ? deadline - SECONDS : 0)); then
      warn "node pid $pid did not stop within 20 s of SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || true
    fi
  done
  rm -f "$STATE"/node*.pid
  "$ROOT/scripts/s3-server.sh" stop "$STATE"
  pg_stop
  rm -f "$ENV_FILE"
  if [ "$purge" = --purge ]; then
    [ -f "$MARKER" ] || die "$STATE was not made by cluster.sh (no $MARKER); not deleting it"
    rm -rf "$STATE"
    [ "$PG_HOME" = "$STATE" ] || rm -rf "$PG_HOME"
    log "stopped; deleted $STATE"
  else
    log "stopped (state kept in $STATE; down --purge deletes it)"
  fi
}

print_summary() {
  local i stop="scripts/cluster.sh down"
  [ "$STATE" = "$ROOT/vidforge-cluster" ] || stop="VIDFORGE_CLUSTER_DIR=$(q "$STATE") $stop"
  echo
  echo "vidforge cluster: $VIDFORGE_NODES nodes behind nginx, state in $STATE"
  echo "  MCP endpoint  $VIDFORGE_CLUSTER_MCP_URL"
  local pair
  for pair in ${VIDFORGE_CLUSTER_TOKENS//,/ }; do
    echo "  token         ${pair%%=*}  (principal ${pair#*=})  -> Authorization: Bearer ${pair%%=*}"
  done
  echo "  uploads       POST $VIDFORGE_CLUSTER_URL/assets?name=<file name>"
  for i in $(seq 1 "$VIDFORGE_NODES"); do
    echo "  node$i         http://127.0.0.1:$(echo "$NODE_PORTS" | cut -d' ' -f"$i")  (log $STATE/node$i.log)${VIDFORGE_CLUSTER_CPUS:+  on CPU $(node_cpu "$i")}"
  done
  echo "  PostgreSQL    $PG_URL  (log $PG_LOG)"
  if [ "${VIDFORGE_CLUSTER_MEDIA:-dir}" = s3 ]; then
    echo "  media         s3://vidforge/cluster at http://127.0.0.1:$S3_PORT  (log $STATE/s3.log)"
  else
    echo "  media         $MEDIA_DIR  (shared by every node)"
  fi
  echo "  gateway log   $STATE/nginx-access.log"
  echo "  environment   $ENV_FILE"
  echo "Stop with: $stop   (--purge also deletes the state dir)"
}

write_env() {
  local i ports=() urls=() pids=() logs=() dirs=() tmp="$ENV_FILE.tmp"
  for i in $(seq 1 "$VIDFORGE_NODES"); do
    ports+=("$(echo "$NODE_PORTS" | cut -d' ' -f"$i")")
    urls+=("http://127.0.0.1:${ports[i - 1]}")
    pids+=("$STATE/node$i.pid")
    logs+=("$STATE/node$i.log")
    dirs+=("$STATE/node$i")
  done
  {
    echo "# Written by scripts/cluster.sh up; load with: set -a; . $(q "$ENV_FILE"); set +a"
    echo "VIDFORGE_CLUSTER_DIR=$(q "$STATE")"
    echo "VIDFORGE_CLUSTER_URL=$(q "$VIDFORGE_CLUSTER_URL")"
    echo "VIDFORGE_CLUSTER_MCP_URL=$(q "$VIDFORGE_CLUSTER_MCP_URL")"
    echo "VIDFORGE_CLUSTER_PORT=$(q "$VIDFORGE_CLUSTER_PORT")"
    echo "VIDFORGE_CLUSTER_TOKEN=$(q "$VIDFORGE_CLUSTER_TOKEN")"
    echo "VIDFORGE_CLUSTER_PRINCIPAL=$(q "$VIDFORGE_CLUSTER_PRINCIPAL")"
    echo "VIDFORGE_CLUSTER_TOKENS=$(q "$VIDFORGE_CLUSTER_TOKENS")"
    echo "VIDFORGE_CLUSTER_CONFIG=$(q "$VIDFORGE_CLUSTER_CONFIG")"
    echo "VIDFORGE_CLUSTER_BIN=$(q "$VIDFORGE_CLUSTER_BIN")"
    echo "VIDFORGE_CLUSTER_ARGS=$(q "${VIDFORGE_CLUSTER_ARGS:-}")"
    echo "VIDFORGE_CLUSTER_CPUS=$(q "${VIDFORGE_CLUSTER_CPUS:-}")"
    echo "VIDFORGE_NODES=$(q "$VIDFORGE_NODES")"
    echo "NODE_PORTS=$(q "${ports[*]}")"
    echo "NODE_URLS=$(q "${urls[*]}")"
    echo "NODE_PID_FILES=$(q "${pids[*]}")"
    echo "NODE_LOGS=$(q "${logs[*]}")"
    echo "NODE_DATA_DIRS=$(q "${dirs[*]}")"
    for i in $(seq 1 "$VIDFORGE_NODES"); do
      echo "NODE${i}_ID=$(q "node$i")"
      echo "NODE${i}_PORT=$(q "${ports[i - 1]}")"
      echo "NODE${i}_URL=$(q "${urls[i - 1]}")"
      echo "NODE${i}_PID_FILE=$(q "${pids[i - 1]}")"
      echo "NODE${i}_LOG=$(q "${logs[i - 1]}")"
      echo "NODE${i}_DATA_DIR=$(q "${dirs[i - 1]}")"
    done
    echo "MEDIA_DIR=$(q "$MEDIA_DIR")"
    echo "VIDFORGE_CLUSTER_MEDIA=$(q "$VIDFORGE_CLUSTER_MEDIA")"
    echo "S3_PORT=$(q "$S3_PORT")"
    echo "S3_ENDPOINT=$(q "http://127.0.0.1:$S3_PORT")"
    echo "PG_URL=$(q "$PG_URL")"
    echo "PG_PORT=$(q "$PG_PORT")"
    echo "PG_BIN=$(q "$PG_BIN")"
    echo "PG_DATA=$(q "$PG_DATA")"
    echo "PG_LOG=$(q "$PG_LOG")"
    echo "PG_SOCKET_DIR=$(q "$PG_SOCK")"
    echo "PG_OS_USER=$(q "$(if is_root; then echo postgres; else id -un; fi)")"
    echo "NGINX_BIN=$(q "$NGINX_BIN")"
    echo "NGINX_CONF=$(q "$NGINX_CONF")"
    echo "NGINX_PID_FILE=$(q "$NGINX_PID_FILE")"
    echo "NGINX_ERROR_LOG=$(q "$NGINX_ERROR_LOG")"
    echo "NGINX_ACCESS_LOG=$(q "$STATE/nginx-access.log")"
  } >"$tmp"
  mv "$tmp" "$ENV_FILE"
}

# token=principal[,...] -> STATE/tokens and STATE/vidforge.toml; sets VIDFORGE_CLUSTER_TOKEN(S).
setup_tokens() {
  local tokens="" pair generated=""
  if [ -n "${VIDFORGE_CLUSTER_TOKENS:-}" ]; then
    tokens="$VIDFORGE_CLUSTER_TOKENS"
  elif [ -s "$STATE/tokens" ]; then
    tokens="$(cat "$STATE/tokens")"
  else
    tokens="vf_$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')=agent"
    generated=1
  fi
  tokens="${tokens// /}"
  [ -n "$tokens" ] || die "VIDFORGE_CLUSTER_TOKENS is empty"
  for pair in ${tokens//,/ }; do
    [[ "$pair" =~ ^[A-Za-z0-9._~+/-]+=[A-Za-z0-9._@-]+$ ]] ||
      die "bad token pair '$pair' in VIDFORGE_CLUSTER_TOKENS (want token=principal[,token=principal], no quotes)"
  done
  (umask 077 && printf '%s\n' "$tokens" >"$STATE/tokens")
  VIDFORGE_CLUSTER_CONFIG="$STATE/vidforge.toml"
  (
    umask 077
    echo "# Written by scripts/cluster.sh up (shared by every node): bearer token -> principal."
    echo "[tokens]"
    for pair in ${tokens//,/ }; do echo "\"${pair%%=*}\" = \"${pair#*=}\""; done
  ) >"$VIDFORGE_CLUSTER_CONFIG"
  VIDFORGE_CLUSTER_TOKENS="$tokens"
  pair="${tokens%%,*}"
  VIDFORGE_CLUSTER_TOKEN="${pair%%=*}"
  VIDFORGE_CLUSTER_PRINCIPAL="${pair#*=}"
  [ -z "$generated" ] || log "generated a bearer token for principal agent (kept in $STATE/tokens)"
}

UP_DONE=0
up_exit() {
  local rc="$1"
  if [ "$UP_DONE" -eq 0 ] && [ "$rc" -ne 0 ]; then
    warn "start-up failed; stopping what was started"
    cmd_down >/dev/null 2>&1 || true
  fi
}

cmd_up() {
  local st=0 gw i ports
  VIDFORGE_CLUSTER_BIN="$(abspath "${VIDFORGE_BIN:-$ROOT/target/release/vidforge}")"
  VIDFORGE_NODES="${VIDFORGE_NODES:-3}"
  VIDFORGE_CLUSTER_PORT="${VIDFORGE_CLUSTER_PORT:-8090}"
  gw="$VIDFORGE_CLUSTER_PORT"
  [[ "$VIDFORGE_NODES" =~ ^[1-9][0-9]?$ ]] || die "VIDFORGE_NODES must be 1..99 (got $VIDFORGE_NODES)"
  if ! [[ "$gw" =~ ^[0-9]+$ ]] || [ "$gw" -lt 1 ] || [ "$gw" -gt 65535 ]; then die "bad VIDFORGE_CLUSTER_PORT $gw"; fi
  if [ -n "${VIDFORGE_CLUSTER_CPUS:-}" ]; then
    [[ "$VIDFORGE_CLUSTER_CPUS" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
      die "VIDFORGE_CLUSTER_CPUS must be CPU numbers separated by commas, such as 0,1 (got $VIDFORGE_CLUSTER_CPUS)"
    command -v taskset >/dev/null || die "VIDFORGE_CLUSTER_CPUS needs taskset (apt-get install util-linux)"
    local cpu
    for cpu in ${VIDFORGE_CLUSTER_CPUS//,/ }; do
      taskset -c "$cpu" true 2>/dev/null ||
        die "taskset -c $cpu fails: CPU $cpu of VIDFORGE_CLUSTER_CPUS is not one this process may use ($(taskset -cp $$ | sed 's/.*: //'))"
    done
  fi

  # Already up? Then say so and stop here; half up: clear the leftovers and start afresh.
  if [ -f "$ENV_FILE" ]; then
    cmd_status quiet || st=$?
    if [ "$st" -eq 0 ]; then
      load_env
      log "already running"
      print_summary
      return 0
    fi
  fi
  if [ -d "$STATE" ]; then
    st=0
    cmd_status quiet || st=$?
    if [ "$st" -ne 3 ]; then
      log "parts of an earlier cluster still run in $STATE; stopping them first"
      cmd_down >/dev/null
    fi
  fi

  [ -x "$VIDFORGE_CLUSTER_BIN" ] || die "$VIDFORGE_CLUSTER_BIN is missing; build it (make build) or set VIDFORGE_BIN"
  local help
  help="$("$VIDFORGE_CLUSTER_BIN" serve --help 2>&1)" || true
  [[ "$help" == *--store* ]] || die "$VIDFORGE_CLUSTER_BIN serve has no --store option; rebuild it"
  [ -x "$PG_BIN/initdb" ] || die "no PostgreSQL 15 in $PG_BIN (apt-get install postgresql, or set VIDFORGE_PG_BIN)"
  NGINX_BIN="$(find_cmd nginx)" || die "nginx is missing (apt-get install nginx)"
  command -v curl >/dev/null || die "curl is missing"
  command -v python3 >/dev/null || die "python3 is missing"
  [ -f "$TEMPLATE" ] || die "missing $TEMPLATE"
  if is_root; then command -v runuser >/dev/null || [ -x /usr/sbin/runuser ] || die "runuser is missing"; fi

  # The gateway port must be free; nodes and PostgreSQL get free ports picked all at once.
  python3 - "$gw" 2>/dev/null <<'EOF' || die "127.0.0.1:$gw is in use (set VIDFORGE_CLUSTER_PORT to another port)"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
EOF
  ports="$(python3 - "$((VIDFORGE_NODES + 2))" "$gw" <<'EOF'
import socket, sys
held, out = [], []
while len(out) < int(sys.argv[1]):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
    port = s.getsockname()[1]
    if port != int(sys.argv[2]):
        out.append(str(port))
print(" ".join(out))
EOF
)"
  PG_PORT="${ports%% *}"
  ports="${ports#* }"
  S3_PORT="${ports%% *}"
  NODE_PORTS="${ports#* }"
  VIDFORGE_CLUSTER_MEDIA="${VIDFORGE_CLUSTER_MEDIA:-dir}"
  case "$VIDFORGE_CLUSTER_MEDIA" in dir | s3) ;; *) die "VIDFORGE_CLUSTER_MEDIA must be dir or s3 (got $VIDFORGE_CLUSTER_MEDIA)" ;; esac

  trap 'up_exit $?' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  mkdir -p "$STATE"
  touch "$MARKER"
  MEDIA_DIR="$STATE/media"
  mkdir -p "$MEDIA_DIR"
  VIDFORGE_CLUSTER_URL="http://127.0.0.1:$gw"
  VIDFORGE_CLUSTER_MCP_URL="$VIDFORGE_CLUSTER_URL/mcp"
  PG_URL="postgres://vidforge@127.0.0.1:$PG_PORT/vidforge"
  setup_tokens

  pg_start "$PG_PORT"
  if [ "$VIDFORGE_CLUSTER_MEDIA" = s3 ]; then
    "$ROOT/scripts/s3-server.sh" start "$STATE" "$S3_PORT" vidforge >/dev/null || die "the S3 server did not start"
  fi

  log "starting $VIDFORGE_NODES nodes ($VIDFORGE_CLUSTER_BIN)"
  for i in $(seq 1 "$VIDFORGE_NODES"); do start_node "$i"; done
  # shellcheck disable=SC2046
  wait_nodes $(seq 1 "$VIDFORGE_NODES") || die "the nodes did not all start"

  # shellcheck disable=SC2086
  render_nginx_conf "$gw" $NODE_PORTS
  nginx_start

  write_env
  UP_DONE=1
  print_summary
}

cmd_node_start() {
  local i="${1:-}"
  [[ "$i" =~ ^[0-9]+$ ]] || die "usage: cluster.sh node-start I"
  load_env
  if [ "$i" -lt 1 ] || [ "$i" -gt "$VIDFORGE_NODES" ]; then die "no node $i (1..$VIDFORGE_NODES)"; fi
  if node_pid "$i" >/dev/null; then
    log "node$i already runs"
    return 0
  fi
  start_node "$i"
  wait_nodes "$i" || die "node$i did not start"
  log "node$i running (pid $(node_pid "$i")), $(echo "$NODE_URLS" | cut -d' ' -f"$i")"
}

cmd_node_kill() {
  local i="${1:-}" pid
  [[ "$i" =~ ^[0-9]+$ ]] || die "usage: cluster.sh node-kill I"
  pid="$(node_pid "$i")" || die "node$i is not running"
  kill -KILL "$pid"
  wait_gone "$pid" 10 || die "node$i (pid $pid) still runs after SIGKILL"
  rm -f "$STATE/node$i.pid"
  log "node$i (pid $pid) killed"
}

cmd_pg_restart() {
  load_env
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -m fast -w -t 60 -s restart; then
    tail_log "$PG_LOG"
    die "PostgreSQL did not restart"
  fi
  log "PostgreSQL restarted ($PG_URL)"
}

cmd_pg_stop() {
  load_env
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 -s stop; then
    tail_log "$PG_LOG"
    die "PostgreSQL did not stop"
  fi
  log "PostgreSQL stopped"
}

cmd_pg_start() {
  load_env
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 -s start; then
    tail_log "$PG_LOG"
    die "PostgreSQL did not start"
  fi
  log "PostgreSQL started ($PG_URL)"
}

usage() {
  sed -n '2,30p' "${BASH_SOURCE[0]}" | sed -n '/^# *scripts\/cluster.sh/p' | sed 's/^# *//' >&2
  exit 2
}

case "${1:-}" in
  up) cmd_up ;;
  down)
    case "${2:-}" in "" | --purge) cmd_down "${2:-}" ;; *) usage ;; esac
    ;;
  status)
    rc=0
    cmd_status || rc=$?
    exit "$rc"
    ;;
  node-start) cmd_node_start "${2:-}" ;;
  node-kill) cmd_node_kill "${2:-}" ;;
  pg-restart) cmd_pg_restart ;;
  pg-stop) cmd_pg_stop ;;
  pg-start) cmd_pg_start ;;
  *) usage ;;
esac
