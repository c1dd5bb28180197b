#!/usr/bin/env bash
# bench/global.sh: GlobalMemory (and Entries.Read) through memoryd vs the same
# SQL run directly through libpq, in the same run.
#
# Seeds a 10k-entity graph (tenant "bench", out-degree 4, with cycles) into
# the dev PostgreSQL, starts memoryd on loopback, then in alternating rounds
# loads (1) GetEntity, (2) a 2-hop Traverse (OUT, limit 100) and (3)
# Entries.Read of one 100-byte entry through memoryd with bench/loadgen (a
# token with global:read and entries:read on every call), and
# the very same statements through libpq with bench/global_bench (built by
# the same functions memoryd uses; one prepared statement per connection,
# no gRPC, no token, no transaction around the read). Prints medians and the
# ratio memoryd/direct at p50 and in qps. Both sides keep the same number of
# requests in flight (BENCH_CONCURRENCY) on the same number of PostgreSQL
# connections.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side and method [3]
#   BENCH_DURATION       measured seconds per round [5]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    requests in flight on each side [4]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_ENTITIES / BENCH_DEGREE   graph size [10000] / out-degree [4]
#   BENCH_GLOBAL_ADDR    memoryd address [127.0.0.1:50073]
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL.

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
ENTITIES=${BENCH_ENTITIES:-10000}
DEGREE=${BENCH_DEGREE:-4}
ADDR=${BENCH_GLOBAL_ADDR:-127.0.0.1:50073}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
DIRECT=bazel-bin/bench/global_bench
MEMORYD=bazel-bin/service/memoryd

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //bench:global_bench //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$DIRECT" "$MEMORYD"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/global-results-$stamp.jsonl"
MEMORYD_LOG="$WORK/global-memoryd-$stamp.log"
MEMORYD_PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$MEMORYD_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/global-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
# The principal global_bench reads as: tenant bench, owner bench-agent,
# own records only, read ceiling PUBLIC.
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant bench \
  --scope "global:read entries:read" --ns 'bench:*:*' --clr PUBLIC --ttl 2h) ||
  die "memoryd token mint failed"

# The pool matches the direct side's connection count.
"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" --pg-pool-size "$CONCURRENCY" >"$MEMORYD_LOG" 2>&1 &
MEMORYD_PID=$!
wait_listening memoryd "$MEMORYD_PID" "$ADDR" "$MEMORYD_LOG"
# memoryd has applied the schema migrations by now.
"$DIRECT" --pg-url "$MEMORYD_PG_URL" seed --entities "$ENTITIES" --degree "$DEGREE" ||
  die "seeding the bench graph failed"

# GetEntityRequest{id: "e0"} and TraverseRequest{start_id: "e0", max_depth: 2}
# as protobuf bytes (field 1 string "e0"; field 4 varint 2).
GET_HEX=0a026530
TRAVERSE_HEX=0a0265302002
# EntriesReadRequest{namespace: "bench:wf:node", key: "k0"} (global_bench seeds it).
READ_HEX=0a0d62656e63683a77663a6e6f646512026b30

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), $CONCURRENCY in flight per side," \
  "memoryd --workers $SERVER_THREADS --pg-pool-size $CONCURRENCY"

via_memoryd() { # label service/method hex
  "$LOADGEN" --target "$ADDR" --method "/memory.v1.$2" --request-hex "$3" \
    --header "authorization: Bearer $TOKEN" --duration "$DURATION" --warmup "$WARMUP" \
    --concurrency "$CONCURRENCY" --channels 1 --label "$1" | tee -a "$WORK/loadgen.out" |
    grep '^{' >>"$RESULTS"
}
# The gRPC floor: Health/Check on the same memoryd with the same token
# header, no backend: what any gRPC round trip costs on this machine.
floor() {
  "$LOADGEN" --target "$ADDR" --header "authorization: Bearer $TOKEN" --duration "$DURATION" \
    --warmup "$WARMUP" --concurrency "$CONCURRENCY" --channels 1 --label health |
    tee -a "$WORK/loadgen.out" | grep '^{' >>"$RESULTS"
}
direct() { # label what
  "$DIRECT" --pg-url "$MEMORYD_PG_URL" run "$2" --threads "$CONCURRENCY" \
    --duration "$DURATION" --warmup "$WARMUP" --label "$1" | grep '^{' >>"$RESULTS"
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  # ABBA: whoever runs second alternates, so a drifting machine favours neither.
  if ((r % 2)); then
    via_memoryd memoryd-get GlobalMemory/GetEntity "$GET_HEX"; direct direct-get get
    via_memoryd memoryd-traverse GlobalMemory/Traverse "$TRAVERSE_HEX"
    direct direct-traverse traverse
    via_memoryd memoryd-read Entries/Read "$READ_HEX"; direct direct-read entries-read
    floor
  else
    floor
    direct direct-get get; via_memoryd memoryd-get GlobalMemory/GetEntity "$GET_HEX"
    direct direct-traverse traverse
    via_memoryd memoryd-traverse GlobalMemory/Traverse "$TRAVERSE_HEX"
    direct direct-read entries-read; via_memoryd memoryd-read Entries/Read "$READ_HEX"
  fi
done

row="%-17s %5s %12s %10s %10s %8s\n"
for what in get traverse read; do
  echo
  case $what in
    get) echo "GetEntity (one entity by id):" ;;
    traverse) echo "Traverse (2 hops out, limit 100, ~21 entities + their edges):" ;;
    read) echo "Entries.Read (one 100-byte entry):" ;;
  esac
  # shellcheck disable=SC2059
  printf "$row" side runs "median qps" "p50 us" "p99 us" errors
  sides="memoryd-$what direct-$what"
  [ "$what" = get ] && sides="$sides health"
  for l in $sides; do
    # shellcheck disable=SC2059
    printf "$row" "$l" "$(field "$l" qps | wc -l)" "$(median "$l" qps)" "$(median "$l" p50_us)" \
      "$(median "$l" p99_us)" "$(total "$l" errors)"
  done
  if [ "$what" = get ]; then
    echo "(health: Health/Check on the same memoryd, same token header, no backend: the"
    echo " gRPC round trip alone on this machine, a floor no gRPC server goes under)"
    ratio_line "GetEntity c=$CONCURRENCY floor: Health/Check p50 $(median health p50_us) us," \
      "$(median health qps) qps; GetEntity/(Health + direct) p50 x$(ratio \
        "$(median memoryd-get p50_us)" "$(awk -v a="$(median health p50_us)" \
          -v b="$(median direct-get p50_us)" 'BEGIN { printf "%.1f", a + b }')")"
  fi
  case $what in get) name=GetEntity ;; traverse) name=Traverse ;; read) name=Entries.Read ;; esac
  ratio_line "$name c=$CONCURRENCY workers=$SERVER_THREADS memoryd/direct: p50 x$(ratio \
    "$(median "memoryd-$what" p50_us)" "$(median "direct-$what" p50_us)") (target <= 1.5)," \
    "qps x$(ratio "$(median "memoryd-$what" qps)" "$(median "direct-$what" qps)")" \
    "(target >= 0.6), memoryd $(median "memoryd-$what" qps) qps"
done
exit 0
