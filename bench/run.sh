#!/usr/bin/env bash
# bench/run.sh: memoryd vs a grpc++ reference server on Health/Check, or
# (BENCH_MODE=auth) memoryd without vs with a capability token.
#
# Default mode: starts memoryd and bench/baseline_server on loopback, loads
# each with bench/loadgen in alternating rounds, and prints the median qps /
# p50 / p99 of each side and the ratios memoryd/grpc++.
# Auth mode: what token checking costs on the hot path. Side A is memoryd
# answering Health/Check without a token (the default --open-health); side B
# is a second memoryd started with --open-health=false, so every call carries
# `authorization: Bearer <token>` through the whole authentication step
# (verified-token cache lookup, revocation check, scope check). The ratio is
# token/no-token. A 2-core machine varies by +-30% from
# run to run, so single runs mean little: only compare medians of rounds.
#
# Exit status: 0 whenever the benchmark ran, however memoryd performed
# (benchmarks never fail the build); 1 if a tool is missing or a server cannot
# start (its log tail is printed).
#
# Environment (defaults in brackets):
#   MEMORYD_BIN          memoryd binary [bazel-bin/service/memoryd]
#   BENCH_ROUNDS         rounds per side [5]
#   BENCH_DURATION       measured seconds per round [5]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    calls in flight [64]
#   BENCH_CHANNELS       connections [4]
#   BENCH_THREADS        loadgen completion-queue threads [1]
#   BENCH_METHOD         method path [/grpc.health.v1.Health/Check]
#   BENCH_REQUEST_HEX    request message, hex protobuf [empty message]
#   BENCH_MODE           grpcpp (memoryd vs grpc++) | auth (no token vs token) [grpcpp]
#   BENCH_AUTH_HEADER_BOTH=1  auth mode: the no-token side gets the header too
#                        (ignored there): isolates the check from the header's cost
#   BENCH_TOKEN          default mode: if set, both sides get 'authorization: Bearer $BENCH_TOKEN'
#   BENCH_MEMORYD_ADDR   [127.0.0.1:50071]    BENCH_BASELINE_ADDR [127.0.0.1:50072]
#   BENCH_SERVER_THREADS threads of each server: memoryd --workers, grpc++
#                        --threads; equal on both sides for a fair ratio [1]
#   BENCH_MEMORYD_ARGS   extra memoryd flags (word-split) []
#   BENCH_BASELINE_ARGS  extra baseline_server flags [--api async]
#   BENCH_START_TIMEOUT  seconds a server may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
#   LOADGEN_BIN, BASELINE_BIN   override the bench tool paths
# .local/env, if present, is sourced first (MEMORYD_PG_URL, MEMORYD_REDIS_URL
# of the dev stack `make bench` starts).

set -u

cd "$(dirname "$0")/.." || exit 1

if [ -f .local/env ]; then
  set -a
  # shellcheck disable=SC1091
  . .local/env
  set +a
fi

ROUNDS=${BENCH_ROUNDS:-5}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-1}
CONCURRENCY=${BENCH_CONCURRENCY:-64}
CHANNELS=${BENCH_CHANNELS:-4}
THREADS=${BENCH_THREADS:-1}
METHOD=${BENCH_METHOD:-/grpc.health.v1.Health/Check}
REQUEST_HEX=${BENCH_REQUEST_HEX:-}
MEMORYD_ADDR=${BENCH_MEMORYD_ADDR:-127.0.0.1:50071}
BASELINE_ADDR=${BENCH_BASELINE_ADDR:-127.0.0.1:50072}
SERVER_THREADS=${BENCH_SERVER_THREADS:-1}
BASELINE_ARGS="--threads $SERVER_THREADS ${BENCH_BASELINE_ARGS:---api async}"
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
# shellcheck source=bench/lib.sh
. bench/lib.sh
LOADGEN=${LOADGEN_BIN:-bazel-bin/bench/loadgen}
BASELINE=${BASELINE_BIN:-bazel-bin/bench/baseline_server}
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}

MODE=${BENCH_MODE:-grpcpp}
case $MODE in
  grpcpp) A_LABEL=memoryd B_LABEL=grpcpp B_NAME=baseline_server ;;
  auth) A_LABEL=no-token B_LABEL=token B_NAME="memoryd (token required)" ;;
  *) die "BENCH_MODE must be grpcpp or auth, got '$MODE'" ;;
esac

case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
case $START_TIMEOUT in '' | *[!0-9]*) die "BENCH_START_TIMEOUT must be whole seconds" ;; esac

# ---- build ------------------------------------------------------------------
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  targets="//bench:loadgen //bench:baseline_server"
  # Only build memoryd when we were not pointed at a binary.
  [ -z "${MEMORYD_BIN:-}" ] && targets="$targets //service:memoryd"
  # shellcheck disable=SC2086
  bazel build $targets || die "bazel build $targets failed"
fi
for bin in "$LOADGEN" "$BASELINE" "$MEMORYD"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done

# Logs and results are written to a private scratch directory and copied to
# $OUT at exit: .local/ belongs to the dev-stack scripts, which may recreate it
# while we run.
stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/results-$stamp.jsonl"
MEMORYD_LOG="$WORK/memoryd-$stamp.log"
BASELINE_LOG="$WORK/baseline-$stamp.log"

# ---- servers ----------------------------------------------------------------
MEMORYD_PID=
BASELINE_PID=

stop_servers() {
  stop_server memoryd "$MEMORYD_PID"
  stop_server "$B_NAME" "$BASELINE_PID"
  MEMORYD_PID=
  BASELINE_PID=
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_servers
  # The results and logs only (named *-$stamp.*): $WORK also holds the
  # throw-away keys, a directory plain cp refuses.
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/*-"$stamp".* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server logs in $OUT/*-$stamp.*" >&2
  else
    echo "bench: could not copy results to $OUT" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM


for addr in "$MEMORYD_ADDR" "$BASELINE_ADDR"; do
  # Otherwise we would silently benchmark whatever already listens there.
  can_connect "$addr" && die "$addr is already in use (a stale server?)"
done

# memoryd verifies tokens with keys from a JWKS file: make a throw-away key
# and, for auth mode, a token that may call anything a plain agent could.
KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
AUTH_TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench --tenant bench \
  --scope "entries:read" --ttl 2h) || die "memoryd token mint failed"

# shellcheck disable=SC2086
MEMORYD_LISTEN=$MEMORYD_ADDR "$MEMORYD" --listen "$MEMORYD_ADDR" --jwks "$KEYS/jwks.json" \
  --workers "$SERVER_THREADS" ${BENCH_MEMORYD_ARGS:-} >"$MEMORYD_LOG" 2>&1 &
MEMORYD_PID=$!
if [ "$MODE" = auth ]; then
  # shellcheck disable=SC2086
  "$MEMORYD" --listen "$BASELINE_ADDR" --jwks "$KEYS/jwks.json" --open-health=false \
    --workers "$SERVER_THREADS" ${BENCH_MEMORYD_ARGS:-} >"$BASELINE_LOG" 2>&1 &
else
  # shellcheck disable=SC2086
  "$BASELINE" --listen "$BASELINE_ADDR" $BASELINE_ARGS >"$BASELINE_LOG" 2>&1 &
fi
BASELINE_PID=$!
wait_listening memoryd "$MEMORYD_PID" "$MEMORYD_ADDR" "$MEMORYD_LOG"
wait_listening "$B_NAME" "$BASELINE_PID" "$BASELINE_ADDR" "$BASELINE_LOG"

# ---- rounds -----------------------------------------------------------------
loadgen_args=(--method "$METHOD" --duration "$DURATION" --warmup "$WARMUP"
  --concurrency "$CONCURRENCY" --channels "$CHANNELS" --threads "$THREADS")
[ -n "$REQUEST_HEX" ] && loadgen_args+=(--request-hex "$REQUEST_HEX")
[ "$MODE" = grpcpp ] && [ -n "${BENCH_TOKEN:-}" ] &&
  loadgen_args+=(--header "authorization: Bearer $BENCH_TOKEN")
# Arguments only side B gets: the token in auth mode. With
# BENCH_AUTH_HEADER_BOTH=1 side A gets the header too (and ignores it), so
# the ratio isolates memoryd's authentication step from the transport cost
# of a 600-byte header.
b_args=()
if [ "$MODE" = auth ] && [ "${BENCH_AUTH_HEADER_BOTH:-0}" = 1 ]; then
  loadgen_args+=(--header "authorization: Bearer $AUTH_TOKEN")
elif [ "$MODE" = auth ]; then
  b_args=(--header "authorization: Bearer $AUTH_TOKEN")
fi

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), c=$CONCURRENCY" \
  "ch=$CHANNELS, $METHOD"
if [ "$MODE" = auth ]; then
  echo "bench: memoryd $MEMORYD without a token on $MEMORYD_ADDR, with a token on" \
    "$BASELINE_ADDR (--open-health=false)"
else
  echo "bench: memoryd $MEMORYD on $MEMORYD_ADDR, grpc++ $BASELINE $BASELINE_ARGS" \
    "on $BASELINE_ADDR"
fi

# one_run LABEL ADDR PID LOG: one loadgen run; its JSON line goes to RESULTS.
# cpu_ticks PID: user + system CPU time of the process, in clock ticks.
cpu_ticks() {
  # Fields after the ")" that ends the command name: utime is the 12th.
  sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

one_run() {
  local label=$1 addr=$2 pid=$3 log=$4 out rc t0 t1 cpu_us extra=()
  [ "$label" = "$B_LABEL" ] && extra=("${b_args[@]}")
  t0=$(cpu_ticks "$pid")
  out=$("$LOADGEN" --target "$addr" --label "$label" "${loadgen_args[@]}" "${extra[@]}")
  rc=$?
  t1=$(cpu_ticks "$pid" 2>/dev/null || echo "$t0")
  # The server's CPU per call: what QPS cannot show once the load generator,
  # not the server, is the bottleneck. Warm-up calls ran at the measured
  # rate, so they are counted in as (duration + warm-up) x qps.
  cpu_us=$(printf '%s\n' "$out" | sed -n 's/.*"qps":\([0-9.]*\).*/\1/p' | head -1 |
    awk -v d="$((t1 - t0))" -v hz="$CLK_TCK" -v s="$DURATION" -v w="$WARMUP" '
      { calls = $1 * (s + w); if (calls > 0) printf "%.2f", d / hz * 1e6 / calls; else printf "nan" }')
  out=$(printf '%s\n' "$out" | sed "s/^{\(.*\)}\$/{\1,\"server_cpu_us_per_call\":${cpu_us:-nan}}/")
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "bench: $label died during the run" >&2
    log_tail "$log"
    exit 1
  fi
  # rc 2 = every call failed: keep the line, the errors column shows it.
  if [ "$rc" != 0 ] && [ "$rc" != 2 ]; then
    echo "bench: loadgen against $label failed (exit $rc)" >&2
    return
  fi
  printf '%s\n' "$out" | grep '^{' | tee -a "$RESULTS"
}

CLK_TCK=$(getconf CLK_TCK)

for ((r = 1; r <= ROUNDS; r++)); do
  # ABBA order: whoever runs second in a pair alternates, so a drift of the
  # machine over time does not favour one side.
  if ((r % 2)); then
    one_run "$A_LABEL" "$MEMORYD_ADDR" "$MEMORYD_PID" "$MEMORYD_LOG"
    one_run "$B_LABEL" "$BASELINE_ADDR" "$BASELINE_PID" "$BASELINE_LOG"
  else
    one_run "$B_LABEL" "$BASELINE_ADDR" "$BASELINE_PID" "$BASELINE_LOG"
    one_run "$A_LABEL" "$MEMORYD_ADDR" "$MEMORYD_PID" "$MEMORYD_LOG"
  fi
done

stop_servers

# ---- summary ----------------------------------------------------------------

m_n=$(field "$A_LABEL" qps | wc -l)
m_qps=$(median "$A_LABEL" qps)
m_p50=$(median "$A_LABEL" p50_us)
m_p99=$(median "$A_LABEL" p99_us)
m_err=$(total "$A_LABEL" errors)
m_cpu=$(median "$A_LABEL" server_cpu_us_per_call)
g_n=$(field "$B_LABEL" qps | wc -l)
g_qps=$(median "$B_LABEL" qps)
g_p50=$(median "$B_LABEL" p50_us)
g_p99=$(median "$B_LABEL" p99_us)
g_err=$(total "$B_LABEL" errors)
g_cpu=$(median "$B_LABEL" server_cpu_us_per_call)
if [ "$MODE" = auth ]; then
  # token/no-token: what the authentication step costs.
  ratio_qps=$(ratio "$g_qps" "$m_qps")
  ratio_p99=$(ratio "$g_p99" "$m_p99")
  ratio_cpu=$(ratio "$g_cpu" "$m_cpu")
else
  ratio_qps=$(ratio "$m_qps" "$g_qps")
  ratio_p99=$(ratio "$m_p99" "$g_p99")
  ratio_cpu=$(ratio "$m_cpu" "$g_cpu")
fi

row='%-10s %6s %12s %10s %10s %14s %8s\n'
echo
# shellcheck disable=SC2059  # the format is ours
{
  printf "$row" side runs "median qps" "p50 us" "p99 us" "cpu us/call" errors
  printf "$row" "$A_LABEL" "$m_n" "$m_qps" "$m_p50" "$m_p99" "$m_cpu" "$m_err"
  printf "$row" "$B_LABEL" "$g_n" "$g_qps" "$g_p50" "$g_p99" "$g_cpu" "$g_err"
}
if [ "$MODE" = auth ]; then
  loss=$(awk -v r="$ratio_qps" 'BEGIN { if (r == "nan") print "nan"; else printf "%.1f", (1 - r) * 100 }')
  ratio_line "Health/Check token/no-token: qps x$ratio_qps ($loss% qps lost to token checking), p99 x$ratio_p99," \
    "server cpu/call x$ratio_cpu; run-to-run noise on this machine is +-30%"
else
  ratio_line "Health/Check memoryd/grpc++: qps x$ratio_qps (higher is better), p99 x$ratio_p99," \
    "server cpu/call x$ratio_cpu (lower is better); run-to-run noise on this machine is +-30%"
fi
summary=$(printf '{"bench":"health_check","mode":"%s","method":"%s","rounds":%s,"duration_s":%s,"concurrency":%s,"channels":%s,"%s":{"runs":%s,"qps":%s,"p50_us":%s,"p99_us":%s,"cpu_us_per_call":%s,"errors":%s},"%s":{"runs":%s,"qps":%s,"p50_us":%s,"p99_us":%s,"cpu_us_per_call":%s,"errors":%s},"ratio_qps":%s,"ratio_p99":%s,"ratio_cpu":%s}' \
  "$MODE" "$METHOD" "$ROUNDS" "$DURATION" "$CONCURRENCY" "$CHANNELS" \
  "$A_LABEL" "$m_n" "$m_qps" "$m_p50" "$m_p99" "$m_cpu" "$m_err" \
  "$B_LABEL" "$g_n" "$g_qps" "$g_p50" "$g_p99" "$g_cpu" "$g_err" "$ratio_qps" "$ratio_p99" "$ratio_cpu")
# JSON has no NaN: a side without results shows as null.
summary=$(printf '%s' "$summary" | sed 's/:nan\([,}]\)/:null\1/g')
echo "$summary"
echo "$summary" >>"$RESULTS"
[ "$m_err" = 0 ] || echo "bench: memoryd answered $m_err calls with errors, see $OUT/results-$stamp.jsonl" >&2
exit 0
