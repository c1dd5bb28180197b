#!/usr/bin/env bash
# bench/recall.sh: what ranked text recall costs, beside what the vector
# search it stands in for costs, in the same run.
#
# 1. In memoryd's process (//bench:lexical_bench): the lexical index (BM25:
#    analysis, postings, top-k) against the exact vector search at the same
#    size (384 dims), build rate, bytes per point and search p50/p99, in
#    alternating rounds, at BENCH_LEX_DOCS texts.
# 2. Through memoryd (no embedder): EpisodicMemory.Search by text (ranked
#    lexically) against Search by vector on a collection of the same size
#    (64 dims), and Health/Check as the gRPC floor, BENCH_POINTS points
#    each, alternating rounds (the order reverses every round).
# Prints medians and the ratios lexical / vector at p50.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [3]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    calls in flight on each side [1]
#   BENCH_POINTS         texts and vectors loaded into memoryd [5000]
#   BENCH_LEX_DOCS       in-process sizes [10000,100000]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_RECALL_ADDR    memoryd address [127.0.0.1:50078]
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
# .local/env (scripts/devstack.sh) must provide MEMORYD_PG_URL. protoc
# (Debian's protobuf-compiler) encodes the requests.

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
POINTS=${BENCH_POINTS:-5000}
LEX_DOCS=${BENCH_LEX_DOCS:-10000,100000}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_RECALL_ADDR:-127.0.0.1:50078}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
LEXBENCH=bazel-bin/bench/lexical_bench
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}
DIMS=64

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //bench:lexical_bench //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$LEXBENCH" "$MEMORYD" "$MEMCALL"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "In memoryd's process: the lexical index vs the exact vector search (384 dims), $ROUNDS alternating rounds:"
"$LEXBENCH" --docs "$LEX_DOCS" --rounds "$ROUNDS" | grep -v '^{'

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/recall-results-$stamp.jsonl"
LOG="$WORK/recall-memoryd-$stamp.log"
PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/recall-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/recall-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TENANT="bench-recall-$stamp-$$"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant "$TENANT" \
  --scope "episodic:read episodic:write" --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"

"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" >"$LOG" 2>&1 &
PID=$!
wait_listening memoryd "$PID" "$ADDR" "$LOG"

memcall() { # METHOD JSON
  "$MEMCALL" -max-time 60 -H "$AUTH" -d "$2" "$ADDR" "$1" >/dev/null 2>"$WORK/memcall.err" ||
    die "$1 failed: $(cat "$WORK/memcall.err")"
}

echo
echo "bench: loading $POINTS texts and $POINTS vectors of $DIMS dims" >&2
memcall memory.v1.EpisodicMemory/CreateCollection '{"name":"texts","dims":0,"distance":"DISTANCE_COSINE"}'
memcall memory.v1.EpisodicMemory/CreateCollection \
  "{\"name\":\"vectors\",\"dims\":$DIMS,\"distance\":\"DISTANCE_COSINE\"}"
# Texts of 10 to 40 words from a 2000-word vocabulary, skewed towards its
# first words (a fixed seed); batches of 50 points.
awk -v n="$POINTS" 'BEGIN {
  srand(5)
  for (b = 0; b < n; b += 50) {
    printf "{\"collection\":\"texts\",\"points\":["
    for (i = b; i < b + 50 && i < n; i++) {
      printf "%s{\"id\":{\"num\":\"%d\"},\"text\":\"", (i > b ? "," : ""), i + 1
      words = 10 + int(rand() * 31)
      for (w = 0; w < words; w++) printf "%sw%d", (w ? " " : ""), int(2000 * rand() ^ 3)
      printf "\"}"
    }
    print "]}"
  }
}' | while read -r body; do memcall memory.v1.EpisodicMemory/Upsert "$body" || exit 1; done ||
  die "loading the texts failed"
awk -v n="$POINTS" -v d="$DIMS" 'BEGIN {
  srand(7)
  for (b = 0; b < n; b += 50) {
    printf "{\"collection\":\"vectors\",\"points\":["
    for (i = b; i < b + 50 && i < n; i++) {
      printf "%s{\"id\":{\"num\":\"%d\"},\"vector\":[", (i > b ? "," : ""), i + 1
      for (j = 0; j < d; j++) printf "%s%.4f", (j ? "," : ""), rand() - 0.5
      printf "]}"
    }
    print "]}"
  }
}' | while read -r body; do memcall memory.v1.EpisodicMemory/Upsert "$body" || exit 1; done ||
  die "loading the vectors failed"

VEC=$(awk -v d="$DIMS" 'BEGIN { srand(11); for (j = 0; j < d; j++) printf "vector: %.4f ", rand() - 0.5 }')
encode() { # FILE TYPE TEXT
  printf '%s\n' "$3" | protoc -I protos -I /usr/include --encode="$2" \
    memory/v1/episodic_memory.proto >"$WORK/$1" || die "protoc could not encode $2"
}
# Eight words, rare and common, as a question would bring them.
encode lexical memory.v1.EpisodicMemorySearchRequest \
  'collection: "texts" text: "w3 w17 w250 w900 w1200 w5 w40 w1500" limit: 10 with_payload: true'
encode vector memory.v1.EpisodicMemorySearchRequest \
  "collection: \"vectors\" $VEC limit: 10 with_payload: true"
: >"$WORK/health"

method_of() {
  case $1 in
    health) echo /grpc.health.v1.Health/Check ;;
    *) echo /memory.v1.EpisodicMemory/Search ;;
  esac
}
side() { # label
  "$LOADGEN" --target "$ADDR" --method "$(method_of "$1")" --request-file "$WORK/$1" \
    --header "$AUTH" --duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONCURRENCY" \
    --expect-code 0 --label "$1" | tee -a "$WORK/recall-loadgen-$stamp.out" |
    grep '^{' >>"$RESULTS"
}

SIDES="lexical vector health"
for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  order=$SIDES
  ((r % 2)) || order=$(tr ' ' '\n' <<<"$SIDES" | tac | tr '\n' ' ')
  for s in $order; do side "$s"; done
done

med() { # LABEL FIELD
  grep "\"label\":\"$1\"" "$RESULTS" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" | awk -f bench/median.awk
}
echo
echo "Through memoryd, $POINTS points, $CONCURRENCY in flight (medians of $ROUNDS rounds):"
row="%-40s %10s %10s %10s\n"
# shellcheck disable=SC2059
printf "$row" side qps p50_us p99_us
for s in $SIDES; do
  # shellcheck disable=SC2059
  printf "$row" "$s" "$(med "$s" qps)" "$(med "$s" p50_us)" "$(med "$s" p99_us)"
done
lp=$(med lexical p50_us) vp=$(med vector p50_us) hp=$(med health p50_us)
echo "Search by text (lexical) / Search by vector, p50: $(ratio "$lp" "$vp")"
echo "Search by text (lexical) / Health (the gRPC floor), p50: $(ratio "$lp" "$hp")"
