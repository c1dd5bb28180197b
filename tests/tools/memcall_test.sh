#!/usr/bin/env bash
# scripts/memcall end to end: a memoryd binary on a throw-away database in the
# PostgreSQL that `make test` starts, driven only through server reflection.
set -u

fail_now() { echo "FAIL: $*" >&2; exit 1; }

ADMIN_URL="${MEMORYD_TEST_PG_URL:-}"
[ -n "$ADMIN_URL" ] ||
  fail_now "MEMORYD_TEST_PG_URL is not set: run the tests with \`make test\`"

RUNFILES="${TEST_SRCDIR:?}/${TEST_WORKSPACE:?}"
MEMCALL="$RUNFILES/scripts/memcall"
MEMORYD="$RUNFILES/service/memoryd"
T="${TEST_TMPDIR:?}"
export PGCONNECT_TIMEOUT=10

DB="memoryd_test_memcall_$$"
DB_CREATED=""
MPID=""

# with_db URL NAME: the connection URL/conninfo with its database replaced by NAME.
with_db() {
  local url=$1 db=$2 query="" rest
  case $url in
    postgres://* | postgresql://*) ;;
    *) printf '%s dbname=%s' "$url" "$db"; return ;;
  esac
  case $url in *\?*) query="?${url#*\?}"; url=${url%%\?*} ;; esac
  rest=${url#*://}
  printf '%s://%s/%s%s' "${url%%://*}" "${rest%%/*}" "$db" "$query"
}

psql_admin() { psql "$ADMIN_URL" -X -q -v ON_ERROR_STOP=1 -c "$1"; }

cleanup() {
  if [ -n "$MPID" ] && kill -0 "$MPID" 2>/dev/null; then
    kill -KILL "$MPID" 2>/dev/null
    wait "$MPID" 2>/dev/null
  fi
  if [ -n "$DB_CREATED" ]; then
    psql_admin "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null ||
      echo "warning: could not drop database $DB" >&2
  fi
}
trap cleanup EXIT

psql_admin "CREATE DATABASE $DB" || fail_now "cannot create database $DB on MEMORYD_TEST_PG_URL"
DB_CREATED=1

# ---- start memoryd and learn its port from the "memoryd serving" log line ----
LOG="$T/memoryd.log"
# memoryd needs token keys; mint a token for the authenticated calls below.
"$MEMORYD" token keygen --kid memcall-1 --private "$T/key.jwk" --jwks "$T/jwks.json" >/dev/null ||
  fail_now "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$T/key.jwk" --sub tester --tenant memcall \
  --scope "entries:read" --ttl 10m) || fail_now "memoryd token mint failed"
"$MEMORYD" --listen=127.0.0.1:0 --pg-url="$(with_db "$ADMIN_URL" "$DB")" --shutdown-grace=1 \
  --jwks="$T/jwks.json" 2>"$LOG" &
MPID=$!
PORT=""
for _ in $(seq 300); do
  PORT=$(grep -F '"msg":"memoryd serving"' "$LOG" | sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p')
  [ -n "$PORT" ] && break
  kill -0 "$MPID" 2>/dev/null || { cat "$LOG" >&2; fail_now "memoryd exited before serving"; }
  sleep 0.1
done
[ -n "$PORT" ] || { cat "$LOG" >&2; fail_now "memoryd did not log 'memoryd serving' within 30 s"; }
ADDR="127.0.0.1:$PORT"
echo "memoryd serving on $ADDR"

# ---- assertion helpers ----
FAILS=0
CASE=""
RC=0
fail() {
  echo "FAIL [$CASE]: $*" >&2
  echo "--- stdout:" >&2; cat "$T/out" >&2
  echo "--- stderr:" >&2; cat "$T/err" >&2
  FAILS=$((FAILS + 1))
}
# mc NAME ARGS...: run memcall (at most 30 s), keeping stdout, stderr and exit code.
mc() {
  CASE=$1
  shift
  timeout 30 "$MEMCALL" "$@" >"$T/out" 2>"$T/err" </dev/null
  RC=$?
}
want_rc() { [ "$RC" = "$1" ] || fail "exit code $RC, want $1"; }
want_out() { grep -qF -- "$1" "$T/out" || fail "stdout lacks: $1"; }
want_err() { grep -qF -- "$1" "$T/err" || fail "stderr lacks: $1"; }

# ---- usage ----
mc "help" -h
want_rc 0
want_out "usage: memcall"
mc "no command" "$ADDR"
want_rc 2

# ---- list and describe ----
mc "list" -plaintext "$ADDR" list
want_rc 0
want_out "grpc.health.v1.Health"
want_out "memory.v1.GlobalMemory"
want_out "grpc.reflection.v1.ServerReflection"

mc "list service" "$ADDR" list memory.v1.Cache
want_rc 0
want_out "memory.v1.Cache.Get"
want_out "memory.v1.Cache.Set"

mc "list unknown service" "$ADDR" list no.such.Service
want_rc 1
want_err "Code: NotFound"

mc "describe method" "$ADDR" describe memory.v1.GlobalMemory.GetEntity
want_rc 0
want_out "memory.v1.GlobalMemory.GetEntity is a method:"
want_out "rpc GetEntity ( .memory.v1.GetEntityRequest ) returns"

mc "describe service" "$ADDR" describe grpc.health.v1.Health
want_rc 0
want_out "service Health {"
want_out "returns ( stream .grpc.health.v1.HealthCheckResponse );"

mc "describe message" "$ADDR" describe grpc.health.v1.HealthCheckResponse
want_rc 0
want_out "message HealthCheckResponse {"
want_out "SERVING = 1;"
want_out ".grpc.health.v1.HealthCheckResponse.ServingStatus status = 1;"

# Every service in one run: files already loaded come again with each answer.
mc "describe all" "$ADDR" describe
want_rc 0
want_out "grpc.health.v1.Health is a service:"
want_out "memory.v1.Cache is a service:"
want_out "rpc PutEntity ( .memory.v1.PutEntityRequest )"

# ---- unary calls ----
mc "Check" "$ADDR" grpc.health.v1.Health/Check
want_rc 0
want_out '"status": "SERVING"'

# The grpcurl way of sending a capability token: -H 'authorization: Bearer ...'.
mc "WhoAmI with a token" -H "authorization: Bearer $TOKEN" "$ADDR" memory.v1.Access/WhoAmI
want_rc 0
want_out '"principal": "tester"'
want_out '"tenant": "memcall"'

mc "WhoAmI without a token" "$ADDR" memory.v1.Access/WhoAmI
want_rc 1
want_err "Unauthenticated"

mc "Check with -d" "$ADDR" -d '{"service":"memory.v1.Cache"}' grpc.health.v1.Health.Check
want_rc 0
want_out '"status": "SERVING"'

echo '{"service": ""}' >"$T/req.json"
mc "Check with -d @file" -d "@$T/req.json" "$ADDR" grpc.health.v1.Health/Check
want_rc 0
want_out '"status": "SERVING"'

CASE="Check with -d @-"
timeout 30 "$MEMCALL" -d @- "$ADDR" grpc.health.v1.Health/Check <"$T/req.json" >"$T/out" 2>"$T/err"
RC=$?
want_rc 0
want_out '"status": "SERVING"'

mc "Check of an unknown service" -d '{"service":"no.such.Service"}' "$ADDR" grpc.health.v1.Health/Check
want_rc 1
want_err "Code: NotFound"

mc "unknown method" "$ADDR" grpc.health.v1.Health/NoSuchMethod
want_rc 1
want_err "Code: Unimplemented"

mc "unknown service" "$ADDR" no.such.Service/Method
want_rc 1
want_err "Unimplemented"

mc "unknown method of an API service" "$ADDR" memory.v1.Privacy/Nope
want_rc 1
want_err "ERROR:"
want_err "Unimplemented"

mc "bad JSON" -d '{"service":' "$ADDR" grpc.health.v1.Health/Check
want_rc 1
want_err "not valid JSON"

mc "unknown field" -d '{"nope":1}' "$ADDR" grpc.health.v1.Health/Check
want_rc 1
want_err 'no field named "nope"'

# ---- server streaming: the first status arrives, -max-time ends the stream ----
mc "Watch" -max-time 2 "$ADDR" grpc.health.v1.Health/Watch
want_rc 1
want_out '"status": "SERVING"'
want_err "Code: DeadlineExceeded"

# ---- graceful shutdown, then a connection failure ----
kill -TERM "$MPID"
for _ in $(seq 150); do kill -0 "$MPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$MPID" 2>/dev/null && { cat "$LOG" >&2; fail_now "memoryd still runs 15 s after SIGTERM"; }
wait "$MPID"
MRC=$?
MPID=""
if [ "$MRC" != 0 ]; then
  cat "$LOG" >&2
  CASE="shutdown"; : >"$T/out"; : >"$T/err"
  fail "memoryd exited with $MRC after SIGTERM, want 0"
fi

mc "connection refused" "$ADDR" list
want_rc 1
want_err "failed to connect to $ADDR"

# ---- a server that accepts TCP and never answers: -connect-timeout ends the wait ----
python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
time.sleep(60)' >"$T/silent.port" &
SILENT_PID=$!
for _ in $(seq 50); do [ -s "$T/silent.port" ] && break; sleep 0.1; done
SILENT="127.0.0.1:$(cat "$T/silent.port")"
started=$(date +%s)
mc "silent server" -connect-timeout 1 "$SILENT" list
took=$(($(date +%s) - started))
kill "$SILENT_PID" 2>/dev/null
want_rc 1
want_err "failed to connect to $SILENT: no answer within 1s"
[ "$took" -le 10 ] || fail "memcall took ${took}s to give up on a silent server"

if [ "$FAILS" != 0 ]; then
  echo "$FAILS check(s) failed" >&2
  exit 1
fi
echo "PASS"
