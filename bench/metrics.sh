#!/usr/bin/env bash
# bench/metrics.sh: what recording metrics costs on the hot path. Two
# memoryds on the same PostgreSQL and Redis, identical but for
# --metrics-listen: A records nothing (no call-metrics observer), B records
# every call (calls by method and code, the latency histogram) and serves
# /metrics, scraped once a second during B's rounds as Prometheus would.
# In alternating (ABBA) rounds it loads Health/Check and Cache.Get (an L1
# hit) on each and prints the medians and the ratios B/A, which should be
# x1.00 within this machine's noise (about ±30% per round on 2 cores).
#
# Exit status: 0 whenever the benchmark ran; 1 if a tool is missing, the
# build fails or a memoryd cannot start.
#
# BENCH_BIN_A=PATH runs memoryd A from another build (an earlier commit's
# bazel-bin/service/memoryd): the ratios then compare builds, both without
# --metrics-listen on A, to show what a change to the hot path costs.
#
# Environment (defaults in brackets): BENCH_ROUNDS [4], BENCH_DURATION [5],
# BENCH_WARMUP [1], BENCH_CONCURRENCY [4], BENCH_SERVER_THREADS [2],
# BENCH_METRICS_ADDR_A [127.0.0.1:50076], BENCH_METRICS_ADDR_B
# [127.0.0.1:50077], BENCH_METRICS_LISTEN [127.0.0.1:9465],
# BENCH_START_TIMEOUT [30], BENCH_SKIP_BUILD=1. .local/env (written by
# scripts/devstack.sh) must provide MEMORYD_PG_URL and MEMORYD_REDIS_URL.
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

ROUNDS=${BENCH_ROUNDS:-4}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-1}
CONCURRENCY=${BENCH_CONCURRENCY:-4}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR_A=${BENCH_METRICS_ADDR_A:-127.0.0.1:50076}
ADDR_B=${BENCH_METRICS_ADDR_B:-127.0.0.1:50077}
METRICS=${BENCH_METRICS_LISTEN:-127.0.0.1:9465}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for a in "$ADDR_A" "$ADDR_B" "$METRICS"; do
  can_connect "$a" && die "$a is already in use (a stale server?)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/results.jsonl"
A_PID= B_PID= SCRAPER=
# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  [ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null
  stop_server "memoryd A" "$A_PID"
  stop_server "memoryd B" "$B_PID"
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

"$MEMORYD" token keygen --kid bench-1 --private "$WORK/bench.jwk" --jwks "$WORK/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$WORK/bench.jwk" --sub bench-agent --tenant bench \
  --scope "cache:read cache:write" --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"
args=(--jwks "$WORK/jwks.json" --workers "$SERVER_THREADS" --pg-url "$MEMORYD_PG_URL"
  --redis-url "$MEMORYD_REDIS_URL")
"${BENCH_BIN_A:-$MEMORYD}" --listen "$ADDR_A" "${args[@]}" >"$WORK/a.log" 2>&1 &
A_PID=$!
"$MEMORYD" --listen "$ADDR_B" --metrics-listen "$METRICS" "${args[@]}" >"$WORK/b.log" 2>&1 &
B_PID=$!
wait_listening "memoryd A" "$A_PID" "$ADDR_A" "$WORK/a.log"
wait_listening "memoryd B" "$B_PID" "$ADDR_B" "$WORK/b.log"
wait_listening "memoryd B's /metrics" "$B_PID" "$METRICS" "$WORK/b.log"

# One 100-byte value; each memoryd reads it once so its L1 holds it.
VALUE_B64=$(head -c 100 /dev/zero | tr '\0' 'v' | base64 -w0)
"$MEMCALL" -max-time 10 -H "$AUTH" -d "{\"key\":\"metrics-bench\",\"value\":\"$VALUE_B64\",\"ttl\":\"3600s\"}" \
  "$ADDR_A" memory.v1.Cache/Set >/dev/null 2>&1 || die "Cache/Set failed"
for a in "$ADDR_A" "$ADDR_B"; do
  "$MEMCALL" -max-time 10 -H "$AUTH" -d '{"key":"metrics-bench"}' "$a" memory.v1.Cache/Get \
    >/dev/null 2>&1 || die "Cache/Get on $a failed"
done
GET_HEX=0a0d$(printf 'metrics-bench' | od -An -tx1 | tr -d ' \n')

scrape() { # once a second while B is loaded, as Prometheus would
  while sleep 1; do (exec 3<>"/dev/tcp/${METRICS%:*}/${METRICS##*:}" &&
    printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3 >/dev/null) 2>/dev/null; done
}
run() { # label addr method [args...]
  local label=$1 addr=$2 method=$3
  shift 3
  "$LOADGEN" --target "$addr" --method "$method" "$@" --duration "$DURATION" \
    --warmup "$WARMUP" --concurrency "$CONCURRENCY" --label "$label" | grep '^{' >>"$RESULTS"
}
side() { # A|B
  local addr=$ADDR_A
  if [ "$1" = B ]; then
    addr=$ADDR_B
    scrape &
    SCRAPER=$!
  fi
  run "health-$1" "$addr" /grpc.health.v1.Health/Check --header "$AUTH"
  run "cache-$1" "$addr" /memory.v1.Cache/Get --request-hex "$GET_HEX" --header "$AUTH"
  if [ -n "$SCRAPER" ]; then
    kill "$SCRAPER" 2>/dev/null
    wait "$SCRAPER" 2>/dev/null
    SCRAPER=
  fi
}

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s per method and side, $CONCURRENCY in flight"
alternate_rounds A B
median_table "Recording metrics: memoryd A (no metrics) vs B (--metrics-listen, scraped every second):" \
  side health-A health-B cache-A cache-B
for m in health cache; do
  ratio_line "metrics on/off, $m: qps x$(ratio "$(median "$m-B" qps)" "$(median "$m-A" qps)")," \
    "p99 x$(ratio "$(median "$m-B" p99_us)" "$(median "$m-A" p99_us)") (1.00 = no cost)"
done
exit 0
