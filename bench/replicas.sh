#!/usr/bin/env bash
# bench/replicas.sh: three memoryd replicas behind nginx (grpc_pass,
# round-robin, as tests/server/replicas_test runs them) vs one replica
# called directly, in the same run, for Entries.Read and Cache.Get. In
# alternating (ABBA) rounds it loads each path and prints the medians of
# throughput and p50/p99, the ratios balanced/direct and what the balancer
# adds to a call (the p50 difference).
#
# On this 2-core machine the three replicas, nginx and the load generator
# share two cores: the figures show correctness and the balancer's
# overhead, not scaling (bench/README.md says how to measure scaling).
#
# Exit status: 0 whenever the benchmark ran; 1 if a tool is missing, the
# build fails or a server cannot start.
#
# Environment (defaults in brackets): BENCH_ROUNDS [4], BENCH_DURATION [5],
# BENCH_WARMUP [1], BENCH_CONCURRENCY [8], BENCH_SERVER_THREADS [1],
# BENCH_REPLICA_PORTS [50081 50082 50083], BENCH_NGINX_PORT [50080],
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
CONCURRENCY=${BENCH_CONCURRENCY:-8}
SERVER_THREADS=${BENCH_SERVER_THREADS:-1}
read -r -a PORTS <<<"${BENCH_REPLICA_PORTS:-50081 50082 50083}"
NGINX_PORT=${BENCH_NGINX_PORT:-50080}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}
NGINX=/usr/sbin/nginx

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
[ -x "$NGINX" ] || die "$NGINX is missing (scripts/install-deps.sh installs nginx)"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for p in "${PORTS[@]}" "$NGINX_PORT"; do
  can_connect "127.0.0.1:$p" && die "127.0.0.1:$p is already in use (a stale server?)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/results.jsonl"
PIDS=()
NGINX_PID=
# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  if [ -n "$NGINX_PID" ]; then
    kill "$NGINX_PID" 2>/dev/null
    wait "$NGINX_PID" 2>/dev/null
  fi
  local i
  for i in "${!PIDS[@]}"; do stop_server "replica $i" "${PIDS[$i]}"; done
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

"$MEMORYD" token keygen --kid bench-1 --private "$WORK/bench.jwk" --jwks "$WORK/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$WORK/bench.jwk" --sub bench-agent --tenant bench \
  --scope "cache:read cache:write entries:read entries:write" --ns 'bench:*:*' --clr PUBLIC \
  --ttl 2h) || die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"
for i in "${!PORTS[@]}"; do
  "$MEMORYD" --listen "127.0.0.1:${PORTS[$i]}" --jwks "$WORK/jwks.json" \
    --workers "$SERVER_THREADS" --pg-url "$MEMORYD_PG_URL" --redis-url "$MEMORYD_REDIS_URL" \
    --retention-sweep-ms 0 >"$WORK/replica$i.log" 2>&1 &
  PIDS[i]=$!
done
for i in "${!PORTS[@]}"; do
  wait_listening "replica $i" "${PIDS[$i]}" "127.0.0.1:${PORTS[$i]}" "$WORK/replica$i.log"
done

# nginx as tests/testing/nginx_balancer.cc configures it.
{
  echo "daemon off; master_process off; error_log $WORK/nginx.log warn; pid $WORK/nginx.pid;"
  echo "events { worker_connections 4096; }"
  echo "http { access_log off; client_body_temp_path $WORK/b; proxy_temp_path $WORK/p;"
  echo "  fastcgi_temp_path $WORK/f; uwsgi_temp_path $WORK/u; scgi_temp_path $WORK/s;"
  echo "  upstream memoryd {"
  for p in "${PORTS[@]}"; do echo "    server 127.0.0.1:$p max_fails=0;"; done
  echo "    keepalive 64; keepalive_requests 1000000; }"
  # nginx ends a client connection with GOAWAY after keepalive_requests
  # calls (1000 by default): calls in flight then fail.
  echo "  server { listen 127.0.0.1:$NGINX_PORT http2; keepalive_requests 1000000;"
  echo "    location / { grpc_pass grpc://memoryd; } } }"
} >"$WORK/nginx.conf"
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/nginx.log" &
NGINX_PID=$!
wait_listening nginx "$NGINX_PID" "127.0.0.1:$NGINX_PORT" "$WORK/nginx.log"
DIRECT=127.0.0.1:${PORTS[0]}
BALANCED=127.0.0.1:$NGINX_PORT

# One entry and one cache value (100 bytes each), read once through every
# replica so each has them cached as a warm replica would.
VALUE_B64=$(head -c 100 /dev/zero | tr '\0' 'v' | base64 -w0)
"$MEMCALL" -max-time 10 -H "$AUTH" -d "{\"namespace\":\"bench:rep:x\",\"key\":\"k\",\"value\":\"$VALUE_B64\"}" \
  "$DIRECT" memory.v1.Entries/Write >/dev/null 2>&1 || die "Entries/Write failed"
"$MEMCALL" -max-time 10 -H "$AUTH" -d "{\"key\":\"rep-bench\",\"value\":\"$VALUE_B64\",\"ttl\":\"3600s\"}" \
  "$DIRECT" memory.v1.Cache/Set >/dev/null 2>&1 || die "Cache/Set failed"
for p in "${PORTS[@]}"; do
  "$MEMCALL" -max-time 10 -H "$AUTH" -d '{"namespace":"bench:rep:x","key":"k"}' \
    "127.0.0.1:$p" memory.v1.Entries/Read >/dev/null 2>&1 || die "Entries/Read on $p failed"
  "$MEMCALL" -max-time 10 -H "$AUTH" -d '{"key":"rep-bench"}' "127.0.0.1:$p" memory.v1.Cache/Get \
    >/dev/null 2>&1 || die "Cache/Get on $p failed"
done
READ_HEX=0a0b$(printf 'bench:rep:x' | od -An -tx1 | tr -d ' \n')1201$(printf 'k' | od -An -tx1 | tr -d ' \n')
GET_HEX=0a09$(printf 'rep-bench' | od -An -tx1 | tr -d ' \n')

run() { # label addr method hex
  "$LOADGEN" --target "$2" --method "$3" --request-hex "$4" --header "$AUTH" \
    --duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONCURRENCY" --label "$1" |
    grep '^{' >>"$RESULTS"
}
side() { # direct|balanced
  local addr=$DIRECT
  [ "$1" = balanced ] && addr=$BALANCED
  run "read-$1" "$addr" /memory.v1.Entries/Read "$READ_HEX"
  run "cache-$1" "$addr" /memory.v1.Cache/Get "$GET_HEX"
}

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s per method and side, $CONCURRENCY in flight;" \
  "${#PORTS[@]} replicas behind nginx vs replica 0 direct"
alternate_rounds direct balanced
median_table "Three replicas behind nginx vs one replica direct:" path \
  read-direct read-balanced cache-direct cache-balanced
for m in read cache; do
  added=$(awk -v a="$(median "$m-balanced" p50_us)" -v b="$(median "$m-direct" p50_us)" \
    'BEGIN { if (a == "nan" || b == "nan") print "nan"; else printf "%+.0f\n", a - b }')
  ratio_line "nginx + 3 replicas vs 1 direct, $m: qps x$(ratio "$(median "$m-balanced" qps)" \
    "$(median "$m-direct" qps)"), p99 x$(ratio "$(median "$m-balanced" p99_us)" \
    "$(median "$m-direct" p99_us)"), balancer adds ${added} us at p50"
done
exit 0
