#!/usr/bin/env bash
# bench/cache.sh: Cache.Get through memoryd, answered from L1 and from L2
# (Redis), vs the trivial Health/Check on the same memoryd and vs a GET of
# the same Redis key straight through hiredis, all in the same run.
#
# Starts memoryd A (L1 on) and memoryd B (--cache-l1-max-entries=0: L1 off,
# every Get goes to Redis) on loopback, both on the dev Redis; stores one
# 100-byte value under BENCH_CACHE_KEY with Cache.Set on A (scripts/memcall,
# ttl 3600s); finds the Redis key memoryd stored it under (bench/cache_bench
# find: SCAN for *KEY whose value holds this run's marker); then in
# alternating rounds loads
#   cache-l1    Cache.Get of the key on A (an L1 hit)
#   cache-l2    Cache.Get of the key on B (an L2 hit)
#   health      grpc.health.v1.Health/Check on A
#   whoami      memory.v1.Access/WhoAmI on A: the trivial method that is
#               authenticated and audited like Cache.Get, so L1-hit/WhoAmI
#               is what the cache itself costs
#   direct-get  GET of memoryd's Redis key with bench/cache_bench (one
#               redisContext per thread, no gRPC, no token)
#   session-get Session.Get on A of a 100-byte record of a session started
#               there (one Redis script that also extends the session)
# with BENCH_CONCURRENCY requests in flight on every side. Prints medians
# and the ratios L1-hit/Health in qps (target >= 0.90), L2-hit/direct in
# p99 and qps, and Session.Get against both Cache.Get hits (goal <= 1.2x).
#
# What it cannot measure it skips with a note and still reports the rest:
# the cache-l2 row when memoryd rejects --cache-l1-max-entries; both Cache
# rows when Cache.Set fails (the status is printed) — the direct side then
# GETs a stand-in key of its own holding a 100-byte value.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd A cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [5]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    requests in flight on each side [4]
#   BENCH_CHANNELS       loadgen connections [1]
#   BENCH_SERVER_THREADS memoryd --workers, both memoryds [2]
#   BENCH_CACHE_ADDR     memoryd A, L1 on [127.0.0.1:50074]
#   BENCH_CACHE_L2_ADDR  memoryd B, L1 off [127.0.0.1:50075]
#   BENCH_CACHE_KEY      the Cache key, 1..127 bytes [bench-key]
#   BENCH_HEALTH_TOKEN   1: Health/Check carries the same token header as
#                        Cache.Get (ignored there), so both pay the same
#                        transport; 0: no header [1]
#   BENCH_START_TIMEOUT  seconds a memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
#   MEMORYD_BIN, MEMCALL_BIN   override the tool paths
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL and MEMORYD_REDIS_URL.

set -u

cd "$(dirname "$0")/.." || exit 1
if [ -f .local/env ]; then
  set -a
  # shellcheck disable=SC1091
  . .local/env
  set +a
fi
# shellcheck source=bench/lib.sh
. bench/lib.sh

ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-1}
CONCURRENCY=${BENCH_CONCURRENCY:-4}
CHANNELS=${BENCH_CHANNELS:-1}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_CACHE_ADDR:-127.0.0.1:50074}
L2_ADDR=${BENCH_CACHE_L2_ADDR:-127.0.0.1:50075}
KEY=${BENCH_CACHE_KEY:-bench-key}
HEALTH_TOKEN=${BENCH_HEALTH_TOKEN:-1}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
DIRECT=bazel-bin/bench/cache_bench
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}
VALUE_BYTES=100
TTL=3600

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
# The request is built below with a one-byte length.
((${#KEY} >= 1 && ${#KEY} <= 127)) || die "BENCH_CACHE_KEY must be 1 to 127 bytes"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //bench:cache_bench //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$DIRECT" "$MEMORYD" "$MEMCALL"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
for a in "$ADDR" "$L2_ADDR"; do
  can_connect "$a" && die "$a is already in use (a stale server?)"
done

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/cache-results-$stamp.jsonl"
A_LOG="$WORK/cache-memoryd-l1-$stamp.log"
B_LOG="$WORK/cache-memoryd-l2-$stamp.log"
A_PID=
B_PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server "memoryd (L1 off)" "$B_PID"
  stop_server memoryd "$A_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/cache-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server logs in $OUT/cache-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# started NAME PID ADDR LOG: 0 once ADDR accepts, 1 (with the log's tail)
# when the server exits first or does not listen within START_TIMEOUT.
# Unlike lib.sh's wait_listening it does not end the script.
started() {
  local name=$1 pid=$2 addr=$3 log=$4 tries=0
  while ! can_connect "$addr"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: $name exited before listening on $addr" >&2
      log_tail "$log"
      return 1
    fi
    if ((++tries > START_TIMEOUT * 10)); then
      echo "bench: $name not listening on $addr after ${START_TIMEOUT}s" >&2
      log_tail "$log"
      return 1
    fi
    sleep 0.1
  done
}

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant bench \
  --scope "cache:read cache:write session:read session:write" --clr PUBLIC --ttl 2h) ||
  die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"

memoryd_args=(--jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS"
  --pg-url "$MEMORYD_PG_URL" --redis-url "$MEMORYD_REDIS_URL")
"$MEMORYD" --listen "$ADDR" "${memoryd_args[@]}" >"$A_LOG" 2>&1 &
A_PID=$!
wait_listening memoryd "$A_PID" "$ADDR" "$A_LOG"

L2_SKIP=
"$MEMORYD" --listen "$L2_ADDR" "${memoryd_args[@]}" --cache-l1-max-entries=0 >"$B_LOG" 2>&1 &
B_PID=$!
if ! started "memoryd --cache-l1-max-entries=0" "$B_PID" "$L2_ADDR" "$B_LOG"; then
  wait "$B_PID" 2>/dev/null
  B_PID=
  reason=$(grep -m1 -i 'cache-l1-max-entries' "$B_LOG")
  L2_SKIP="memoryd did not start with --cache-l1-max-entries=0${reason:+ ($reason)}"
  echo "bench: NOTE: skipping the L2-hit row: $L2_SKIP" >&2
fi

# The value: 100 bytes, the first 0xff so it is not UTF-8 (memoryd scans
# UTF-8 values for PII), then a marker unique to this run that tells
# memoryd's Redis key apart from any stale one, padded with dots.
marker="cachebench$(LC_ALL=C tr -dc '[:lower:]' </dev/urandom | head -c 16)"
{
  printf '\377%s' "$marker"
  printf "%$((VALUE_BYTES - 1 - ${#marker}))s" '' | tr ' ' '.'
} >"$WORK/value"
[ "$(wc -c <"$WORK/value")" -eq "$VALUE_BYTES" ] || die "could not make a ${VALUE_BYTES}-byte value"
VALUE_B64=$(base64 -w0 "$WORK/value")

JSON_KEY=${KEY//\\/\\\\}
JSON_KEY=${JSON_KEY//\"/\\\"}
# CacheGetRequest{key: KEY}: field 1, wire type 2, one-byte length.
GET_HEX=$(printf '0a%02x' "${#KEY}")$(printf '%s' "$KEY" | od -An -tx1 | tr -d ' \n')

memcall() { # ADDR METHOD JSON: the response or the error on stdout, memcall's status
  "$MEMCALL" -max-time 10 -H "$AUTH" -d "$3" "$1" "$2" 2>&1
}
indent() { sed 's/^/    /'; }

CACHE_SKIP=
if out=$(memcall "$ADDR" memory.v1.Cache/Set \
  "{\"key\":\"$JSON_KEY\",\"value\":\"$VALUE_B64\",\"ttl\":\"${TTL}s\"}"); then
  echo "bench: Cache/Set $KEY (${VALUE_BYTES} bytes, ttl ${TTL}s) on $ADDR: OK" >&2
else
  code=$(sed -n 's/^ *Code: *//p' <<<"$out" | head -n1)
  CACHE_SKIP="Cache/Set failed: ${code:-see above}"
  echo "bench: NOTE: Cache/Set on $ADDR failed; skipping the Cache.Get rows:" >&2
  indent <<<"$out" >&2
fi

# The Redis key memoryd stored the value under: the direct side GETs it.
REDIS_KEY=
DIRECT_NOTE=
if [ -z "$CACHE_SKIP" ]; then
  # shellcheck disable=SC2001  # escaping four glob characters
  glob="*$(sed 's/[][*?\\]/\\&/g' <<<"$KEY")"
  if REDIS_KEY=$("$DIRECT" --redis-url "$MEMORYD_REDIS_URL" find "$glob" --contains "$marker"); then
    echo "bench: memoryd stored it in Redis as $REDIS_KEY" >&2
  else
    REDIS_KEY=
    DIRECT_NOTE="no Redis key holds the value memoryd stored"
  fi
  # Where each memoryd answers from; the second Get on B would be an L1 hit
  # if its L1 were on.
  for side in "A $ADDR CACHE_LOOKUP_HIT_L1" "B $L2_ADDR CACHE_LOOKUP_HIT_L2"; do
    read -r name addr want <<<"$side"
    [ "$name" = B ] && [ -n "$L2_SKIP" ] && continue
    got=
    for _ in 1 2; do
      got=$(memcall "$addr" memory.v1.Cache/Get "{\"key\":\"$JSON_KEY\"}") || break
    done
    lookup=$(grep -o 'CACHE_LOOKUP_[A-Z0-9_]*' <<<"$got" | head -n1)
    if [ "$lookup" = "$want" ]; then
      echo "bench: Cache/Get on memoryd $name ($addr): $lookup" >&2
    else
      echo "bench: WARNING: Cache/Get on memoryd $name ($addr) answered" \
        "${lookup:-without a lookup}, expected $want; its row measures that:" >&2
      indent <<<"$got" >&2
    fi
  done
else
  DIRECT_NOTE="$CACHE_SKIP"
fi
if [ -z "$REDIS_KEY" ]; then
  REDIS_KEY="memoryd-bench:cache:$KEY"
  echo "bench: NOTE: $DIRECT_NOTE; the direct side GETs a stand-in key," \
    "$REDIS_KEY, holding ${VALUE_BYTES} bytes" >&2
  "$DIRECT" --redis-url "$MEMORYD_REDIS_URL" set "$REDIS_KEY" --size "$VALUE_BYTES" \
    --ttl "$TTL" >/dev/null || die "cannot SET $REDIS_KEY in Redis"
fi

# A session on A holding the same value under "k": Session.Get's request.
SESSION_SKIP=
if out=$(memcall "$ADDR" memory.v1.Session/Start '{"duration":"7200s"}') &&
  SESSION_ID=$(grep -o '"sessionId": *"[^"]*"' <<<"$out" | sed 's/.*"\([^"]*\)"$/\1/') &&
  [ -n "$SESSION_ID" ] &&
  out=$(memcall "$ADDR" memory.v1.Session/Set \
    "{\"sessionId\":\"$SESSION_ID\",\"key\":\"k\",\"value\":\"$VALUE_B64\"}"); then
  echo "bench: session $SESSION_ID holds the value under k" >&2
  # SessionGetRequest{session_id: 1, key: 2}.
  SESSION_GET_HEX=$(printf '0a%02x' "${#SESSION_ID}")$(printf '%s' "$SESSION_ID" |
    od -An -tx1 | tr -d ' \n')12016b
else
  SESSION_SKIP="Session/Start or Set failed"
  echo "bench: NOTE: skipping the Session.Get row:" >&2
  indent <<<"$out" >&2
fi

health_args=()
[ "$HEALTH_TOKEN" = 1 ] && health_args=(--header "$AUTH")

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), $CONCURRENCY in flight per side" \
  "on $CHANNELS channel(s), memoryd --workers $SERVER_THREADS"

via_loadgen() { # label addr method [loadgen args...]
  local label=$1 addr=$2 method=$3
  shift 3
  "$LOADGEN" --target "$addr" --method "$method" "$@" \
    --duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONCURRENCY" \
    --channels "$CHANNELS" --label "$label" | tee -a "$WORK/cache-loadgen-$stamp.out" |
    grep '^{' >>"$RESULTS"
}
side() { # label
  case $1 in
    cache-l1)
      [ -z "$CACHE_SKIP" ] || return 0
      via_loadgen cache-l1 "$ADDR" /memory.v1.Cache/Get --request-hex "$GET_HEX" \
        --header "$AUTH"
      ;;
    cache-l2)
      [ -z "$CACHE_SKIP" ] && [ -z "$L2_SKIP" ] || return 0
      via_loadgen cache-l2 "$L2_ADDR" /memory.v1.Cache/Get --request-hex "$GET_HEX" \
        --header "$AUTH"
      ;;
    health)
      via_loadgen health "$ADDR" /grpc.health.v1.Health/Check "${health_args[@]}"
      ;;
    whoami)
      # The trivial authenticated method: token check + audit row, no work.
      via_loadgen whoami "$ADDR" /memory.v1.Access/WhoAmI --header "$AUTH"
      ;;
    session-get)
      [ -z "$SESSION_SKIP" ] || return 0
      via_loadgen session-get "$ADDR" /memory.v1.Session/Get --request-hex "$SESSION_GET_HEX" \
        --header "$AUTH"
      ;;
    direct-get)
      "$DIRECT" --redis-url "$MEMORYD_REDIS_URL" run "$REDIS_KEY" --threads "$CONCURRENCY" \
        --duration "$DURATION" --warmup "$WARMUP" --label direct-get | grep '^{' >>"$RESULTS"
      ;;
  esac
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  # ABBA: the pairs compared (L1 vs Health, L2 vs direct) swap order every
  # round, so a drifting machine favours neither.
  if ((r % 2)); then
    order="cache-l1 health whoami cache-l2 session-get direct-get"
  else
    order="direct-get session-get cache-l2 whoami health cache-l1"
  fi
  for s in $order; do side "$s"; done
done

echo
echo "Cache.Get of one ${VALUE_BYTES}-byte value vs Health/Check vs a direct Redis GET:"
row="%-22s %5s %12s %10s %10s %8s\n"
# shellcheck disable=SC2059
printf "$row" side runs "median qps" "p50 us" "p99 us" errors
for l in cache-l1 cache-l2 session-get health whoami direct-get; do
  case $l in
    cache-l1) name="Cache.Get L1 hit"; skip=$CACHE_SKIP ;;
    cache-l2) name="Cache.Get L2 hit"; skip=${CACHE_SKIP:-$L2_SKIP} ;;
    health) name="Health/Check"; skip= ;;
    whoami) name="Access.WhoAmI"; skip= ;;
    direct-get) name="direct GET (hiredis)"; skip= ;;
    session-get) name="Session.Get"; skip=$SESSION_SKIP ;;
  esac
  if [ -n "$skip" ]; then
    printf "%-22s skipped: %s\n" "$name" "$skip"
    continue
  fi
  # shellcheck disable=SC2059
  printf "$row" "$name" "$(field "$l" qps | wc -l)" "$(median "$l" qps)" \
    "$(median "$l" p50_us)" "$(median "$l" p99_us)" "$(total "$l" errors)"
done
[ "$HEALTH_TOKEN" = 1 ] || echo "(Health/Check sent without the token header)"
[ -n "$DIRECT_NOTE" ] && echo "(direct GET: stand-in key $REDIS_KEY: $DIRECT_NOTE)"
echo
vs() { # A B: "xA/B", or n/a when a side has no figure
  local r
  r=$(ratio "$1" "$2")
  if [ "$r" = nan ]; then echo "n/a"; else echo "x$r"; fi
}
ratio_line "Cache.Get L1-hit/Health:     qps $(vs "$(median cache-l1 qps)" "$(median health qps)")" \
  "(target >= 0.90, higher is better)"
ratio_line "Cache.Get L1-hit/WhoAmI:     qps $(vs "$(median cache-l1 qps)" "$(median whoami qps)")" \
  "(WhoAmI: the trivial method that, like Cache.Get, is authenticated and audited)"
ratio_line "Cache.Get L2-hit/direct GET: p99 $(vs "$(median cache-l2 p99_us)" "$(median direct-get p99_us)")" \
  "(lower is better), qps $(vs "$(median cache-l2 qps)" "$(median direct-get qps)")"
ratio_line "Session.Get/Cache.Get L2-hit: p50 $(vs "$(median session-get p50_us)" "$(median cache-l2 p50_us)")," \
  "qps $(vs "$(median cache-l2 qps)" "$(median session-get qps)") (goal <= 1.2, lower is better)"
ratio_line "Session.Get/Cache.Get L1-hit: p50 $(vs "$(median session-get p50_us)" "$(median cache-l1 p50_us)")," \
  "qps $(vs "$(median cache-l1 qps)" "$(median session-get qps)") (goal <= 1.2; L1 never leaves the process)"
exit 0
