#!/usr/bin/env bash
# bench/working.sh: WorkingMemory.Render through memoryd vs the same
# statement, decoding and rendering run directly through libpq
# (bench/working_bench), in the same run, alternating rounds.
#
# Seeds tenant "bench"'s working memory (working_bench seed): node
# bench:wf:big's global memory of 1000 documents of 200 characters (FULL
# does not fit 4000 characters: the answer is the cut TREE, every row
# read) and its thread t1's 20 documents of 150 characters (FULL fits).
# Loads Render at max_chars 4000 of each through memoryd with bench/loadgen
# (a token with working:read on every call), the direct side's same work,
# and Health/Check on the same memoryd as the gRPC floor. Prints medians of
# qps, p50 and p99 per side, and the ratio memoryd/direct. The issue's
# goal: Render of the 1000-document memory under 2 ms at p50 and p99.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [5]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    requests in flight on each side [4]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_WORKING_ADDR   memoryd address [127.0.0.1:50078]
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL. protoc encodes the requests.

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
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_WORKING_ADDR:-127.0.0.1:50078}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
DIRECT=bazel-bin/bench/working_bench
MEMORYD=bazel-bin/service/memoryd

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //bench:working_bench //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$DIRECT" "$MEMORYD"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/working-results-$stamp.jsonl"
MEMORYD_LOG="$WORK/working-memoryd-$stamp.log"
MEMORYD_PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$MEMORYD_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/working-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
# The principal working_bench reads as: tenant bench, owner bench-agent,
# own records only, read ceiling PUBLIC.
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant bench \
  --scope "working:read" --ns 'bench:*:*' --clr PUBLIC --ttl 2h) ||
  die "memoryd token mint failed"

"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" --pg-pool-size "$CONCURRENCY" >"$MEMORYD_LOG" 2>&1 &
MEMORYD_PID=$!
wait_listening memoryd "$MEMORYD_PID" "$ADDR" "$MEMORYD_LOG"
"$DIRECT" --pg-url "$MEMORYD_PG_URL" seed || die "seeding the bench memories failed"

encode() { # FILE TEXT
  printf '%s\n' "$2" | protoc -I protos -I /usr/include \
    --encode=memory.v1.WorkingMemoryRenderRequest memory/v1/working_memory.proto \
    >"$WORK/$1" || die "protoc could not encode $1"
}
encode big 'memory { node: "bench:wf:big" scope: WORKING_MEMORY_SCOPE_GLOBAL } max_chars: 4000'
encode small 'memory { node: "bench:wf:big" scope: WORKING_MEMORY_SCOPE_PER_THREAD
  thread_id: "t1" } max_chars: 4000'

via_memoryd() { # what
  "$LOADGEN" --target "$ADDR" --method /memory.v1.WorkingMemory/Render \
    --request-file "$WORK/$1" --header "authorization: Bearer $TOKEN" --duration "$DURATION" \
    --warmup "$WARMUP" --concurrency "$CONCURRENCY" --channels 1 --expect-code 0 \
    --label "memoryd-$1" | tee -a "$WORK/loadgen.out" | grep '^{' >>"$RESULTS"
}
direct() { # what
  "$DIRECT" --pg-url "$MEMORYD_PG_URL" run "$1" --threads "$CONCURRENCY" \
    --duration "$DURATION" --warmup "$WARMUP" --label "direct-$1" | grep '^{' >>"$RESULTS"
}
floor() {
  "$LOADGEN" --target "$ADDR" --header "authorization: Bearer $TOKEN" --duration "$DURATION" \
    --warmup "$WARMUP" --concurrency "$CONCURRENCY" --channels 1 --label health |
    tee -a "$WORK/loadgen.out" | grep '^{' >>"$RESULTS"
}

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), $CONCURRENCY in flight per side," \
  "memoryd --workers $SERVER_THREADS --pg-pool-size $CONCURRENCY"
for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  if ((r % 2)); then
    via_memoryd big; direct big; via_memoryd small; direct small; floor
  else
    floor; direct small; via_memoryd small; direct big; via_memoryd big
  fi
done

row="%-15s %5s %12s %10s %10s %8s\n"
for what in big small; do
  echo
  case $what in
    big) echo "Render at 4000 characters, 1000 documents (FULL ~214k characters: the cut TREE):" ;;
    small) echo "Render at 4000 characters, a thread's 20 documents (FULL, 3.4k characters):" ;;
  esac
  # shellcheck disable=SC2059
  printf "$row" side runs "median qps" "p50 us" "p99 us" errors
  sides="memoryd-$what direct-$what"
  [ "$what" = big ] && sides="$sides health"
  for l in $sides; do
    # shellcheck disable=SC2059
    printf "$row" "$l" "$(field "$l" qps | wc -l)" "$(median "$l" qps)" "$(median "$l" p50_us)" \
      "$(median "$l" p99_us)" "$(total "$l" errors)"
  done
  ratio_line "Render $what c=$CONCURRENCY memoryd/direct: p50 x$(ratio \
    "$(median "memoryd-$what" p50_us)" "$(median "direct-$what" p50_us)")," \
    "qps x$(ratio "$(median "memoryd-$what" qps)" "$(median "direct-$what" qps)");" \
    "memoryd p50 $(median "memoryd-$what" p50_us) us, p99 $(median "memoryd-$what" p99_us) us" \
    "(goal < 2000 us)"
done
exit 0
