#!/usr/bin/env bash
# bench/router.sh: Router.Query's overhead over the tier methods it wraps,
# the hybrid's parallelism, and recent_lookup against a Cache.Get L1 hit,
# all through the same memoryd in the same run.
#
# Starts memoryd on the dev PostgreSQL and Redis, mints a token, and loads
# BENCH_ENTITIES entities of type "doc" (every tenth named "... alpha"),
# a chain of relationships doc-0 -> doc-1 -> ..., a 64-dimension COSINE
# collection of BENCH_POINTS points (a fixed seed; every point names an
# entity in its payload's entity_id), one entry and one cache value. Then,
# in alternating rounds (the order reverses every round), loads
#   graph-router   Router.Query graph_query {type doc, text "alpha"}
#   graph-tier     GlobalMemory.QueryEntities, the same query
#   vector-router  Router.Query vector_search (limit 10)
#   vector-tier    EpisodicMemory.Search, the same search
#   hybrid         Router.Query hybrid of those two parts
#   recent         Router.Query recent_lookup of the entry (an L1 hit)
#   cache-get      Cache.Get of the value (an L1 hit)
# with BENCH_CONCURRENCY calls in flight (1: latency). Prints medians and
# the ratios router/tier p50 per kind (goal <= 1.1), hybrid/slower part p50
# (goal <= 1.2: the parts run in parallel) and recent/Cache.Get p50 (goal
# <= 1.2).
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [3]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    calls in flight on each side [1]
#   BENCH_ENTITIES       entities loaded [1000]
#   BENCH_POINTS         points loaded [2000]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_ROUTER_ADDR    memoryd address [127.0.0.1:50077]
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
#   MEMORYD_BIN, MEMCALL_BIN   override the tool paths
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL and MEMORYD_REDIS_URL. protoc (Debian's
# protobuf-compiler) encodes the requests.

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
WARMUP=${BENCH_WARMUP:-1}
CONCURRENCY=${BENCH_CONCURRENCY:-1}
ENTITIES=${BENCH_ENTITIES:-1000}
POINTS=${BENCH_POINTS:-2000}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_ROUTER_ADDR:-127.0.0.1:50077}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}
DIMS=64

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$MEMORYD" "$MEMCALL"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/router-results-$stamp.jsonl"
LOG="$WORK/router-memoryd-$stamp.log"
PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/router-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/router-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TENANT="bench-router-$stamp-$$"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant "$TENANT" \
  --scope "router:query global:read global:write episodic:read episodic:write entries:read entries:write cache:read cache:write" \
  --ns '*:*:*' --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"

"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" --redis-url "$MEMORYD_REDIS_URL" >"$LOG" 2>&1 &
PID=$!
wait_listening memoryd "$PID" "$ADDR" "$LOG"

memcall() { # METHOD JSON
  "$MEMCALL" -max-time 60 -H "$AUTH" -d "$2" "$ADDR" "$1" >/dev/null 2>"$WORK/memcall.err" ||
    die "$1 failed: $(cat "$WORK/memcall.err")"
}

echo "bench: loading $ENTITIES entities, $POINTS points of $DIMS dims" >&2
for ((i = 0; i < ENTITIES; i++)); do
  name="doc $i"
  ((i % 10 == 0)) && name="doc $i alpha"
  echo "{\"id\":\"doc-$i\",\"type\":\"doc\",\"name\":\"$name\"}"
done | while read -r body; do memcall memory.v1.GlobalMemory/PutEntity "$body" || exit 1; done ||
  die "loading the entities failed"
for ((i = 0; i + 1 < ENTITIES && i < 50; i++)); do
  memcall memory.v1.GlobalMemory/PutRelationship \
    "{\"sourceId\":\"doc-$i\",\"type\":\"next\",\"targetId\":\"doc-$((i + 1))\"}"
done
memcall memory.v1.EpisodicMemory/CreateCollection \
  "{\"name\":\"bench\",\"dims\":$DIMS,\"distance\":\"DISTANCE_COSINE\"}"
# Points in batches of 50 (one argument of memcall stays far below the
# kernel's 128 KiB), vectors from a fixed seed; point i names
# doc-(i mod ENTITIES).
awk -v n="$POINTS" -v d="$DIMS" -v ents="$ENTITIES" 'BEGIN {
  srand(7)
  for (b = 0; b < n; b += 50) {
    printf "{\"collection\":\"bench\",\"points\":["
    for (i = b; i < b + 50 && i < n; i++) {
      printf "%s{\"id\":{\"num\":\"%d\"},\"vector\":[", (i > b ? "," : ""), i + 1
      for (j = 0; j < d; j++) printf "%s%.4f", (j ? "," : ""), rand() - 0.5
      printf "],\"payload\":{\"entity_id\":\"doc-%d\"}}", i % ents
    }
    print "]}"
  }
}' | while read -r body; do memcall memory.v1.EpisodicMemory/Upsert "$body" || exit 1; done ||
  die "loading the points failed"
memcall memory.v1.Entries/Write '{"namespace":"bench:router:x","key":"hot","value":"aG90IHZhbHVl"}'
memcall memory.v1.Cache/Set '{"key":"hot","value":"aG90IHZhbHVl","ttl":"3600s"}'

# The requests, encoded by protoc from text.
VEC=$(awk -v d="$DIMS" 'BEGIN { srand(11); for (j = 0; j < d; j++) printf "vector: %.4f ", rand() - 0.5 }')
GRAPH='entity_type: "doc" text_query: "alpha"'
encode() { # FILE TYPE TEXT
  printf '%s\n' "$3" | protoc -I protos -I /usr/include --encode="$2" \
    memory/v1/router.proto memory/v1/global_memory.proto memory/v1/episodic_memory.proto \
    memory/v1/cache.proto >"$WORK/$1" || die "protoc could not encode $2"
}
encode graph-router memory.v1.RouterQueryRequest "graph_query { $GRAPH } limit: 10"
encode graph-tier memory.v1.QueryEntitiesRequest "type: \"doc\" text_query: \"alpha\" page_size: 10"
encode vector-router memory.v1.RouterQueryRequest \
  "vector_search { collection: \"bench\" $VEC } limit: 10"
encode vector-tier memory.v1.EpisodicMemorySearchRequest "collection: \"bench\" $VEC limit: 10"
encode hybrid memory.v1.RouterQueryRequest \
  "hybrid { vector_search { collection: \"bench\" $VEC } graph_query { $GRAPH } } limit: 10"
encode recent memory.v1.RouterQueryRequest \
  'recent_lookup { namespace: "bench:router:x" key: "hot" }'
encode cache-get memory.v1.CacheGetRequest 'key: "hot"'

method_of() {
  case $1 in
    graph-tier) echo /memory.v1.GlobalMemory/QueryEntities ;;
    vector-tier) echo /memory.v1.EpisodicMemory/Search ;;
    cache-get) echo /memory.v1.Cache/Get ;;
    *) echo /memory.v1.Router/Query ;;
  esac
}
side() { # label
  "$LOADGEN" --target "$ADDR" --method "$(method_of "$1")" --request-file "$WORK/$1" \
    --header "$AUTH" --duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONCURRENCY" \
    --expect-code 0 --label "$1" | tee -a "$WORK/router-loadgen-$stamp.out" |
    grep '^{' >>"$RESULTS"
}

SIDES="graph-router graph-tier vector-router vector-tier hybrid recent cache-get"
echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), $CONCURRENCY in flight per side," \
  "memoryd --workers $SERVER_THREADS"
for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  order=$SIDES
  ((r % 2)) || order=$(tr ' ' '\n' <<<"$SIDES" | tac | tr '\n' ' ')
  for s in $order; do side "$s"; done
done

echo
echo "Router.Query vs the tier methods it wraps ($CONCURRENCY in flight):"
row="%-32s %5s %12s %10s %10s %8s\n"
# shellcheck disable=SC2059
printf "$row" side runs "median qps" "p50 us" "p99 us" errors
for l in $SIDES; do
  case $l in
    graph-router) name="Router graph_query" ;;
    graph-tier) name="GlobalMemory.QueryEntities" ;;
    vector-router) name="Router vector_search" ;;
    vector-tier) name="EpisodicMemory.Search" ;;
    hybrid) name="Router hybrid" ;;
    recent) name="Router recent_lookup (L1)" ;;
    cache-get) name="Cache.Get (L1 hit)" ;;
  esac
  # shellcheck disable=SC2059
  printf "$row" "$name" "$(field "$l" qps | wc -l)" "$(median "$l" qps)" \
    "$(median "$l" p50_us)" "$(median "$l" p99_us)" "$(total "$l" errors)"
done
echo
vs() { # A B: "xA/B", or n/a
  local r
  r=$(ratio "$1" "$2")
  if [ "$r" = nan ]; then echo "n/a"; else echo "x$r"; fi
}
g=$(median graph-router p50_us)
v=$(median vector-router p50_us)
slower=$(awk -v a="$g" -v b="$v" 'BEGIN { print (a > b ? a : b) }')
ratio_line "Router graph_query/QueryEntities:   p50 $(vs "$g" "$(median graph-tier p50_us)")" \
  "(goal <= 1.1)"
ratio_line "Router vector_search/Search:        p50 $(vs "$v" "$(median vector-tier p50_us)")" \
  "(goal <= 1.1)"
ratio_line "Router hybrid/slower part alone:    p50 $(vs "$(median hybrid p50_us)" "$slower")" \
  "(goal <= 1.2: the parts run in parallel; sequential would be about" \
  "$(vs "$(awk -v a="$g" -v b="$v" 'BEGIN { print a + b }')" "$slower"))"
ratio_line "Router recent_lookup/Cache.Get L1:  p50 $(vs "$(median recent p50_us)" "$(median cache-get p50_us)")" \
  "(goal <= 1.2)"
exit 0
