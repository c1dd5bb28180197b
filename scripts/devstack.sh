#!/usr/bin/env bash
# A private development stack for memoryd: PostgreSQL and Redis on loopback,
# with all state under .local/ in the repository root.
#
#   scripts/devstack.sh start    start both (idempotent; fast when running)
#   scripts/devstack.sh stop     stop both, and a memoryd started by `make run`
#   scripts/devstack.sh status   print what runs (exit 0 if both backends run, else 3)
#   scripts/devstack.sh env      print `export MEMORYD_PG_URL=... MEMORYD_REDIS_URL=...`
#   scripts/devstack.sh start-memoryd [BIN]  (for `make run`) start memoryd in the
#                        background with .local/env, wait until it listens
#   scripts/devstack.sh stop-memoryd   stop only the memoryd from .local/memoryd.pid
#   scripts/devstack.sh destroy  stop, then delete .local/ (and any /tmp fallback dir)
#
# Environment:
#   MEMORYD_DEV_PG_PORT     PostgreSQL port on 127.0.0.1 (default 55432)
#   MEMORYD_DEV_REDIS_PORT  Redis port on 127.0.0.1 (default 56379)
#   MEMORYD_DEV_PG_BIN      PostgreSQL bin dir (default: newest /usr/lib/postgresql/*/bin)
#   MEMORYD_LISTEN          HOST:PORT for start-memoryd (default 127.0.0.1:50051)
#   MEMORYD_METRICS_LISTEN  HOST:PORT of its Prometheus /metrics (default 127.0.0.1:9464;
#                           empty = none)
#
# PostgreSQL refuses to run as root: when run as root, the cluster belongs to the
# `postgres` user and initdb/pg_ctl run through `runuser -u postgres --`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOCAL="$ROOT/.local"
PG_PORT="${MEMORYD_DEV_PG_PORT:-55432}"
REDIS_PORT="${MEMORYD_DEV_REDIS_PORT:-56379}"
HOST=127.0.0.1

PG_LINK="$LOCAL/pg"            # dir (or symlink to the /tmp fallback) holding data/ and run/
PG_LOG="$LOCAL/postgres.log"   # file (or symlink into the /tmp fallback)
REDIS_PID="$LOCAL/redis.pid"
REDIS_PORT_FILE="$LOCAL/redis.port"
REDIS_LOG="$LOCAL/redis.log"
MEMORYD_PID="$LOCAL/memoryd.pid"
ENV_FILE="$LOCAL/env"
PG_START_TIMEOUT=60
REDIS_START_TIMEOUT=15

say() { echo "devstack: $*"; }
die() { echo "devstack: error: $*" >&2; exit 1; }

is_root() { ((EUID == 0)); }

# Run a command as the PostgreSQL server user (postgres when we are root), from
# a directory that user can read.
as_pg() {
  if is_root; then
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

check_port_var() {
  local name=$1 value=$2
  if ! [[ $value =~ ^[1-9][0-9]{0,4}$ ]] || ((value > 65535)); then
    die "$name='$value' is not a valid port number"
  fi
}

# True if something accepts TCP connections on host $1 port $2.
tcp_open() {
  # shellcheck disable=SC2016 # $0/$1 expand in the inner bash
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}
port_in_use() { tcp_open "$HOST" "$1"; }

# Pids of processes named $1 whose working directory $2 has been deleted: a
# stack orphaned by deleting .local/ while it ran.
orphans() {
  local d want="$2 (deleted)" cwd comm
  for d in /proc/[0-9]*; do
    { read -r comm <"$d/comm"; } 2>/dev/null || continue
    [[ $comm == "$1"* ]] || continue
    cwd="$(readlink "$d/cwd" 2>/dev/null)" || continue
    [[ $cwd == "$want" ]] || continue
    # Only the postmaster, not its children ("postgres: checkpointer", ...).
    [[ $1 != postgres || "$(tr '\0' '\n' <"$d/cmdline" 2>/dev/null | head -n1)" == */postgres ]] || continue
    echo "${d#/proc/}"
  done
  return 0
}

# Fail because port $1 (set by env var $2) is taken; name an orphan of ours.
die_port_busy() {
  local port=$1 var=$2 pids
  pids="$(orphans postgres "$(pg_data)"; orphans redis-server "$LOCAL")"
  if [[ -n $pids ]]; then
    die "port $port on $HOST is busy; processes $(echo "$pids" | paste -sd' ') are a dev stack whose .local/ was deleted while it ran -- stop them (kill -INT PID) or set $var to a free port"
  fi
  die "port $port on $HOST is in use by something else; set $var to a free port"
}

# True if pid $1 is alive, its executable name starts with $2 and (if $3 is
# given) its working directory is $3 -- so a recycled pid is not taken for ours.
pid_is() {
  local pid=$1 name=$2 dir=${3:-} comm
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 1
  [[ $comm == "$name"* ]] || return 1
  [[ -z $dir || "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$(readlink -f "$dir")" ]]
}

# Close every inherited descriptor above 2: a daemon must not keep the caller's
# pipes (or our lock) open. Call it in the subshell that starts the daemon, not
# under a redirection (bash would park the saved descriptor above 2).
close_fds() {
  local f n fds=()
  for f in /proc/"$BASHPID"/fd/*; do fds+=("${f##*/}"); done
  for n in "${fds[@]}"; do
    # Re-check: the glob's own directory descriptor is gone by now.
    if ((n > 2)) && [[ -e /proc/$BASHPID/fd/$n ]]; then exec {n}>&-; fi
  done
}

# ---------------------------------------------------------------- PostgreSQL

pg_bin_dir() {
  if [[ -n ${MEMORYD_DEV_PG_BIN:-} ]]; then
    echo "$MEMORYD_DEV_PG_BIN"
    return
  fi
  # An existing cluster must keep the major version that created it.
  local data ver
  data="$(pg_base)/data"
  if [[ -f $data/PG_VERSION ]]; then
    ver="$(<"$data/PG_VERSION")"
    if [[ -x /usr/lib/postgresql/$ver/bin/postgres ]]; then
      echo "/usr/lib/postgresql/$ver/bin"
      return
    fi
  fi
  local d best=""
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x $d/postgres && -x $d/initdb ]] || continue
    if [[ -z $best ]] || [[ "$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n1)" == "$d" ]]; then
      best=$d
    fi
  done
  [[ -n $best ]] || die "no PostgreSQL server found under /usr/lib/postgresql/*/bin (run scripts/install-deps.sh)"
  echo "$best"
}

# The real (symlink-resolved) directory holding data/ and run/.
pg_base() {
  if [[ -e $PG_LINK ]]; then
    readlink -f "$PG_LINK"
  else
    echo "$PG_LINK"
  fi
}

pg_data() { echo "$(pg_base)/data"; }

# Print the pid of our running postmaster, or fail.
pg_running_pid() {
  local data pid
  data="$(pg_data)"
  [[ -f $data/postmaster.pid ]] || return 1
  pid="$(head -n1 "$data/postmaster.pid" 2>/dev/null)" || return 1
  pid_is "$pid" postgres "$data" || return 1
  echo "$pid"
}

pg_running_port() { sed -n 4p "$(pg_data)/postmaster.pid" 2>/dev/null; }

# Create .local/pg (or its /tmp fallback) such that the server user can reach it.
pg_prepare_dirs() {
  mkdir -p "$LOCAL"
  [[ -e $PG_LINK ]] && return 0
  if is_root; then
    id -u postgres >/dev/null 2>&1 || die "user 'postgres' does not exist (is the postgresql package installed?)"
    chmod go+x "$LOCAL"
    if as_pg test -x "$LOCAL"; then
      install -d -o postgres -g postgres -m 700 "$PG_LINK"
    else
      # A parent of the repo is not searchable by 'postgres' (e.g. a clone under
      # /root): keep the cluster in /tmp and point .local/pg at it.
      local fb
      fb="/tmp/memoryd-devstack-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)"
      say "note: user 'postgres' cannot traverse to $LOCAL; the PostgreSQL cluster lives in $fb"
      if [[ -e $fb ]]; then
        [[ -d $fb && ! -L $fb && "$(stat -c %U "$fb")" == postgres ]] ||
          die "$fb exists and is not a directory owned by postgres; remove it"
      else
        install -d -o postgres -g postgres -m 700 "$fb"
      fi
      ln -sfn "$fb" "$PG_LINK"
      touch "$fb/postgres.log" && chown postgres:postgres "$fb/postgres.log"
      ln -sfn "$fb/postgres.log" "$PG_LOG"
    fi
  else
    mkdir -p "$PG_LINK"
    chmod 700 "$PG_LINK"
  fi
}

pg_init() {
  local base data bin
  base="$(pg_base)"
  data="$base/data"
  bin="$(pg_bin_dir)"
  if [[ ! -L $PG_LOG ]]; then
    touch "$PG_LOG"
    if is_root; then chown postgres:postgres "$PG_LOG"; fi
  fi
  if [[ ! -f $data/PG_VERSION ]]; then
    say "initdb $data ($("$bin/postgres" --version))"
    rm -rf "$data"
    if ! as_pg "$bin/initdb" -D "$data" -U postgres -A trust --auth-host=trust \
        --encoding=UTF8 --locale=C --no-sync --no-instructions >>"$PG_LOG" 2>&1; then
      tail -n 20 "$PG_LOG" >&2 || true
      die "initdb failed; see $PG_LOG"
    fi
    echo "include_if_exists = 'devstack.conf'" | as_pg tee -a "$data/postgresql.conf" >/dev/null
  fi
  as_pg mkdir -p -m 700 "$base/run"
}

pg_start() {
  local data bin sockdir
  data="$(pg_data)"
  bin="$(pg_bin_dir)"
  sockdir="$(pg_base)/run"
  # sun_path is 108 bytes: "<dir>/.s.PGSQL.<port>" must fit.
  if ((${#sockdir} > 90)); then
    sockdir="/tmp/memoryd-devstack-sock-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)"
    as_pg mkdir -p -m 700 "$sockdir"
    say "note: $(pg_base)/run is too long for a unix socket path; using $sockdir"
  fi
  # Loopback only; a throw-away dev cluster, so durability is traded for speed.
  as_pg tee "$data/devstack.conf" >/dev/null <<EOF
# Written by scripts/devstack.sh on every start; edits are overwritten.
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = '$sockdir'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  say "starting PostgreSQL on $HOST:$PG_PORT (log: ${PG_LOG#"$ROOT"/})"
  if ! (exec >/dev/null; close_fds; as_pg "$bin/pg_ctl" -D "$data" \
          -l "$(readlink -f "$PG_LOG")" -w -t "$PG_START_TIMEOUT" start); then
    tail -n 20 "$PG_LOG" >&2 || true
    die "PostgreSQL failed to start on $HOST:$PG_PORT (or took over ${PG_START_TIMEOUT}s); see $PG_LOG"
  fi
  local i
  for ((i = 0; i < PG_START_TIMEOUT * 5; i++)); do
    "$bin/pg_isready" -q -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -t 1 && return 0
    sleep 0.2
  done
  tail -n 20 "$PG_LOG" >&2 || true
  die "PostgreSQL started but does not accept connections on $HOST:$PG_PORT; see $PG_LOG"
}

# Role and database `memoryd`, idempotently.
pg_ensure_db() {
  local bin
  bin="$(pg_bin_dir)"
  "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U postgres -d postgres >/dev/null <<'SQL' ||
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'memoryd') THEN
    CREATE ROLE memoryd LOGIN SUPERUSER;
  END IF;
END
$$;
SELECT 'CREATE DATABASE memoryd OWNER memoryd'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'memoryd') \gexec
SQL
    die "could not create role/database memoryd on $HOST:$PG_PORT; see $PG_LOG"
}

pg_stop() {
  local pid
  if pid="$(pg_running_pid)"; then
    say "stopping PostgreSQL (pid $pid)"
    as_pg "$(pg_bin_dir)/pg_ctl" -D "$(pg_data)" -m fast -w -t 60 stop >/dev/null || {
      echo "devstack: error: pg_ctl stop failed; see $PG_LOG" >&2
      return 1
    }
  fi
}

# --------------------------------------------------------------------- Redis

redis_running_pid() {
  local pid
  [[ -f $REDIS_PID ]] || return 1
  pid="$(<"$REDIS_PID")"
  pid_is "$pid" redis-server "$LOCAL" || return 1
  echo "$pid"
}

# The port our redis was started on.
redis_running_port() { cat "$REDIS_PORT_FILE" 2>/dev/null || echo "$REDIS_PORT"; }

redis_ping() { [[ "$(redis-cli -h "$HOST" -p "$1" ping 2>/dev/null)" == PONG ]]; }

redis_start() {
  command -v redis-server >/dev/null || die "redis-server not installed (run scripts/install-deps.sh)"
  mkdir -p "$LOCAL"
  rm -f "$REDIS_PID"
  echo "$REDIS_PORT" >"$REDIS_PORT_FILE"
  say "starting Redis on $HOST:$REDIS_PORT (log: ${REDIS_LOG#"$ROOT"/})"
  if ! (
    exec >/dev/null
    close_fds
    # Redis is the store of record for blackboards: an append-only file
    # synced every second keeps them across a restart of the stack, and
    # nothing is ever evicted to make room.
    exec redis-server --port "$REDIS_PORT" --bind "$HOST" \
      --save "" --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
      --daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_LOG" --dir "$LOCAL"
  ); then
    tail -n 20 "$REDIS_LOG" >&2 || true
    die "redis-server failed to start; see $REDIS_LOG"
  fi
  local i
  for ((i = 0; i < REDIS_START_TIMEOUT * 10; i++)); do
    redis_ping "$REDIS_PORT" && return 0
    # The pidfile is written once the port is bound; without it, redis died.
    ((i < 20)) || redis_running_pid >/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$REDIS_LOG" >&2 || true
  die "Redis did not answer PING on $HOST:$REDIS_PORT; see $REDIS_LOG"
}

redis_stop() {
  local pid port i
  pid="$(redis_running_pid)" || { rm -f "$REDIS_PID"; return 0; }
  port="$(redis_running_port)"
  say "stopping Redis (pid $pid)"
  redis-cli -h "$HOST" -p "${port:-$REDIS_PORT}" shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$REDIS_PID"
}

# ------------------------------------------------------------------- memoryd

memoryd_running_pid() {
  local pid
  [[ -f $MEMORYD_PID ]] || return 1
  pid="$(<"$MEMORYD_PID")"
  pid_is "$pid" memoryd || return 1
  echo "$pid"
}

memoryd_stop() {
  local pid i
  pid="$(memoryd_running_pid)" || { rm -f "$MEMORYD_PID"; return 0; }
  say "stopping memoryd (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "memoryd did not exit within 15s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$MEMORYD_PID"
}

# Start memoryd in the background (used by `make run`): env from .local/env,
# MEMORYD_LISTEN (default 127.0.0.1:50051), output to .local/memoryd.log, pid to
# .local/memoryd.pid; wait until it listens.
memoryd_start() {
  local bin=${1:-$ROOT/bazel-bin/service/memoryd}
  local listen=${MEMORYD_LISTEN:-127.0.0.1:50051}
  local metrics=${MEMORYD_METRICS_LISTEN-127.0.0.1:9464}
  local log=$LOCAL/memoryd.log host port pid rc deadline
  [[ -x $bin ]] || die "$bin does not exist; build it first (make build)"
  [[ -f $ENV_FILE ]] || die "$ENV_FILE is missing; run 'scripts/devstack.sh start' first"
  memoryd_stop

  host=${listen%:*}
  port=${listen##*:}
  host=${host#[}
  host=${host%]}
  case $host in "" | 0.0.0.0 | "::" | "*") host=127.0.0.1 ;; esac
  [[ $port =~ ^[0-9]+$ && $listen == *:* ]] ||
    die "MEMORYD_LISTEN='$listen' is not HOST:PORT"
  if tcp_open "$host" "$port"; then
    die "$host:$port is already in use; set MEMORYD_LISTEN to another HOST:PORT"
  fi

  dev_keys "$bin"
  if [[ -f $log ]]; then mv -f "$log" "$log.1"; fi
  (
    # shellcheck source=/dev/null
    source "$ENV_FILE"
    export MEMORYD_LISTEN=$listen MEMORYD_METRICS_LISTEN=$metrics
    export MEMORYD_JWKS=$LOCAL/keys/jwks.json MEMORYD_SIGNING_KEY=$LOCAL/keys/memoryd.jwk
    cd "$ROOT"
    exec </dev/null >>"$log" 2>&1
    close_fds
    # setsid: detached from make's terminal and process group; same pid.
    exec setsid "$bin"
  ) &
  pid=$!
  echo "$pid" >"$MEMORYD_PID"
  say "starting memoryd (pid $pid) on $listen"

  deadline=$((SECONDS + 20))
  until tcp_open "$host" "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rc=0
      wait "$pid" 2>/dev/null || rc=$?
      echo "---- last 20 lines of ${log#"$ROOT"/} ----" >&2
      tail -n 20 "$log" >&2 || true
      rm -f "$MEMORYD_PID"
      die "memoryd exited (status $rc) before listening on $listen"
    fi
    if ((SECONDS >= deadline)); then
      echo "---- last 20 lines of ${log#"$ROOT"/} ----" >&2
      tail -n 20 "$log" >&2 || true
      memoryd_stop
      die "memoryd did not listen on $listen within 20s (stopped it)"
    fi
    sleep 0.2
  done

  local metrics_url="off (set MEMORYD_METRICS_LISTEN=HOST:PORT)"
  [[ -n $metrics ]] && metrics_url="http://$metrics/metrics"
  cat <<EOF

memoryd is running (pid $pid)
  address:  $listen
  metrics:  $metrics_url
  log:      ${log#"$ROOT"/}
  backends: $(sed -n 's/^export //p' "$ENV_FILE" | paste -sd' ')
  stop:     make stop        (stops memoryd, PostgreSQL and Redis)
  keys:     .local/keys/jwks.json (trusted), .local/keys/memoryd.jwk (signing key)
  token:    .local/dev-token (tenant dev, principal dev, every scope but pii:write, 30 days)
  try:      scripts/memcall $host:$port list
            scripts/memcall $host:$port grpc.health.v1.Health/Check
            scripts/memcall -H "authorization: Bearer \$(cat .local/dev-token)" \\
                $host:$port memory.v1.Access/WhoAmI
            (grpcurl -plaintext $host:$port ... takes the same arguments where installed)
EOF
}

# dev_keys BIN: a development signing key and JWKS under .local/keys (made
# once, kept across runs) and a fresh 30-day token in .local/dev-token.
dev_keys() {
  local bin=$1 keys=$LOCAL/keys
  mkdir -p "$keys"
  chmod 700 "$keys"
  if [[ ! -f $keys/memoryd.jwk ]]; then
    rm -f "$keys/jwks.json"
    "$bin" token keygen --kid dev-1 --private "$keys/memoryd.jwk" --jwks "$keys/jwks.json" \
      >/dev/null || die "memoryd token keygen failed"
    say "created a development signing key in .local/keys/"
  fi
  (
    umask 077
    "$bin" token mint --key "$keys/memoryd.jwk" --sub dev --tenant dev \
      --scope "global:* episodic:* cache:* entries:* working:* session:* blackboard:* router:* privacy:* audit:read:all access:attenuate admin" \
      --ns '*:*:*' --clr SECRET --lvl PUBLIC --ttl 30d >"$LOCAL/dev-token"
  ) || die "memoryd token mint failed"
}

# ------------------------------------------------------------------ commands

env_lines() {
  echo "export MEMORYD_PG_URL=postgresql://memoryd@$HOST:$1/memoryd"
  echo "export MEMORYD_REDIS_URL=redis://$HOST:$2"
}

with_lock() {
  mkdir -p "$LOCAL"
  exec 9>"$LOCAL/devstack.lock"
  flock -w 300 9 || die "another devstack command holds $LOCAL/devstack.lock"
}

cmd_start() {
  check_port_var MEMORYD_DEV_PG_PORT "$PG_PORT"
  check_port_var MEMORYD_DEV_REDIS_PORT "$REDIS_PORT"
  [[ $PG_PORT != "$REDIS_PORT" ]] || die "MEMORYD_DEV_PG_PORT and MEMORYD_DEV_REDIS_PORT are both $PG_PORT"
  with_lock

  local pg_up="" redis_up="" port
  if pg_running_pid >/dev/null; then
    port="$(pg_running_port)"
    [[ $port == "$PG_PORT" ]] ||
      die "our PostgreSQL already runs on port $port, not MEMORYD_DEV_PG_PORT=$PG_PORT; run 'scripts/devstack.sh stop' first"
    pg_up=1
  elif port_in_use "$PG_PORT"; then
    die_port_busy "$PG_PORT" MEMORYD_DEV_PG_PORT
  fi
  if redis_running_pid >/dev/null; then
    port="$(redis_running_port)"
    [[ $port == "$REDIS_PORT" ]] ||
      die "our Redis already runs on port $port, not MEMORYD_DEV_REDIS_PORT=$REDIS_PORT; run 'scripts/devstack.sh stop' first"
    redis_up=1
  elif port_in_use "$REDIS_PORT"; then
    die_port_busy "$REDIS_PORT" MEMORYD_DEV_REDIS_PORT
  fi

  if [[ -z $pg_up ]]; then
    pg_prepare_dirs
    pg_init
    pg_start
  fi
  pg_ensure_db
  if [[ -z $redis_up ]]; then
    redis_start
  fi
  env_lines "$PG_PORT" "$REDIS_PORT" >"$ENV_FILE"

  if [[ -n $pg_up && -n $redis_up ]]; then
    say "already running (postgres $HOST:$PG_PORT, redis $HOST:$REDIS_PORT)"
  else
    say "running: postgres $HOST:$PG_PORT, redis $HOST:$REDIS_PORT (env: ${ENV_FILE#"$ROOT"/})"
  fi
}

cmd_stop() {
  [[ -d $LOCAL ]] || { say "nothing to stop"; return 0; }
  with_lock
  local rc=0
  memoryd_stop || rc=1
  pg_stop || rc=1
  redis_stop || rc=1
  ((rc == 0)) || die "not everything stopped cleanly"
  say "stopped"
}

cmd_status() {
  local pid rc=0 rel_data
  rel_data="$(pg_data)"
  rel_data="${rel_data#"$ROOT"/}"
  if pid="$(pg_running_pid)"; then
    echo "postgres: running (pid $pid) on $HOST:$(pg_running_port), data $rel_data, log ${PG_LOG#"$ROOT"/}"
  else
    echo "postgres: not running"
    rc=3
  fi
  if pid="$(redis_running_pid)"; then
    echo "redis:    running (pid $pid) on $HOST:$(redis_running_port), log ${REDIS_LOG#"$ROOT"/}"
  else
    echo "redis:    not running"
    rc=3
  fi
  if pid="$(memoryd_running_pid)"; then
    echo "memoryd:  running (pid $pid), log .local/memoryd.log"
  else
    echo "memoryd:  not running"
  fi
  return "$rc"
}

cmd_env() {
  # The ports of the running stack; the configured ones for what is not running.
  local pg_port=$PG_PORT redis_port=$REDIS_PORT
  if pg_running_pid >/dev/null; then pg_port="$(pg_running_port)"; fi
  if redis_running_pid >/dev/null; then redis_port="$(redis_running_port)"; fi
  env_lines "$pg_port" "$redis_port"
}

cmd_destroy() {
  local base=""
  cmd_stop
  if [[ -L $PG_LINK ]]; then base="$(readlink -f "$PG_LINK")"; fi
  rm -rf "$LOCAL"
  if [[ -n $base && $base == /tmp/memoryd-devstack-* ]]; then rm -rf "$base"; fi
  rm -rf "/tmp/memoryd-devstack-sock-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)"
  say "removed .local"
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  start-memoryd) shift; memoryd_start "$@" ;;
  stop-memoryd) memoryd_stop ;;
  destroy) cmd_destroy ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
