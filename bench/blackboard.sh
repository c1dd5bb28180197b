#!/usr/bin/env bash
# bench/blackboard.sh: the Blackboard through two memoryd replicas vs its
# own Lua script straight through hiredis, in the same run
# (bench/blackboard_bench.cc says what each figure is):
#   post        Blackboard.Post on A vs EVALSHA of the same script with the
#               same arguments (goal: <= 1.5x at p50)
#   propagate   post on A -> event on a subscriber of B, p50/p99 at
#               BENCH_RATE posts/s and at the highest rate (goal p99 < 5 ms)
#   fanout      BENCH_SUBSCRIBERS streams on one board of B: posts/s and
#               events/s sustained, B's memory per subscriber
# Both replicas run on the dev PostgreSQL and Redis (posts store their
# audit rows in PostgreSQL before they are answered, as every write does).
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or a memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         alternating rounds [3]
#   BENCH_DURATION       measured seconds per round and side [3]
#   BENCH_RATE           the paced propagation rate, posts/s [100]
#   BENCH_POSTERS        concurrent posters at the highest rate [4]
#   BENCH_SUBSCRIBERS    streams of the fan-out [1000]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_BB_A_ADDR      replica A [127.0.0.1:50076]
#   BENCH_BB_B_ADDR      replica B [127.0.0.1:50077]
#   BENCH_START_TIMEOUT  seconds a memoryd may take to listen [30]
#   BENCH_OUT            directory for logs [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
#   MEMORYD_BIN, BENCH_BB_BIN  the memoryd and bench binaries (to compare builds)
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
DURATION=${BENCH_DURATION:-3}
RATE=${BENCH_RATE:-100}
POSTERS=${BENCH_POSTERS:-4}
SUBSCRIBERS=${BENCH_SUBSCRIBERS:-1000}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
A_ADDR=${BENCH_BB_A_ADDR:-127.0.0.1:50076}
B_ADDR=${BENCH_BB_B_ADDR:-127.0.0.1:50077}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
BENCH=${BENCH_BB_BIN:-bazel-bin/bench/blackboard_bench}

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:blackboard_bench //service:memoryd || die "bazel build failed"
fi
for bin in "$MEMORYD" "$BENCH"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
for a in "$A_ADDR" "$B_ADDR"; do
  can_connect "$a" && die "$a is already in use (a stale server?)"
done

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
A_LOG="$WORK/blackboard-memoryd-a-$stamp.log"
B_LOG="$WORK/blackboard-memoryd-b-$stamp.log"
A_PID=
B_PID=
# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server "memoryd B" "$B_PID"
  stop_server "memoryd A" "$A_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/blackboard-* "$OUT"/ 2>/dev/null; then
    echo "bench: server logs in $OUT/blackboard-*-$stamp.log" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TENANT="bench-bb-$stamp-$$"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant "$TENANT" \
  --scope "blackboard:read blackboard:write" --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"

streams=$((SUBSCRIBERS + 64))
memoryd_args=(--jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS"
  --pg-url "$MEMORYD_PG_URL" --redis-url "$MEMORYD_REDIS_URL"
  --max-streams "$streams" --max-streams-per-tenant "$streams"
  --max-streams-per-principal "$streams")
"$MEMORYD" --listen "$A_ADDR" "${memoryd_args[@]}" >"$A_LOG" 2>&1 &
A_PID=$!
wait_listening "memoryd A" "$A_PID" "$A_ADDR" "$A_LOG"
"$MEMORYD" --listen "$B_ADDR" "${memoryd_args[@]}" >"$B_LOG" 2>&1 &
B_PID=$!
wait_listening "memoryd B" "$B_PID" "$B_ADDR" "$B_LOG"

echo "bench: blackboard: A $A_ADDR, B $B_ADDR, $ROUNDS rounds of ${DURATION}s, tenant $TENANT" >&2
"$BENCH" --a "$A_ADDR" --b "$B_ADDR" --token "$TOKEN" --tenant "$TENANT" \
  --redis "$MEMORYD_REDIS_URL" --rounds "$ROUNDS" --seconds "$DURATION" --rate "$RATE" \
  --posters "$POSTERS" --subscribers "$SUBSCRIBERS" --b-pid "$B_PID" |
  while IFS= read -r line; do
    case $line in
      "RATIO: "*) ratio_line "${line#RATIO: }" ;;
      *) echo "$line" ;;
    esac
  done
exit 0
