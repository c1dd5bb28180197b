#!/usr/bin/env bash
# bench/embedder.sh: EpisodicMemory.Search by text vs by vector through
# memoryd, and the embedder called directly, in the same run, alternating
# rounds.
#
# No embeddings provider can run here: the embedder is the embedder
# contract stand-in (tests/contract/embedder_contract_server.py, a Python
# HTTP server), so the embedder's own time is the stand-in's, not a
# model's. What the figures say is memoryd's cost around the embedder
# (means, so that they add up):
#   text - vector          what a text query adds to a vector query;
#   exchange               memoryd's own measure of one embeddings request
#                          (memoryd_backend_request_duration_seconds of
#                          backend "embedder" on /metrics, over the text
#                          side's rounds): the stand-in's time and the wire;
#   text - vector - exchange   what memoryd's text path costs besides the
#                          request: the body, the answer's parsing, the
#                          model check, normalization.
# One embeddings request made directly (bench/embed_direct.py, Python,
# one kept-alive connection) is printed as the embedder's baseline.
#
# Seeds a collection of BENCH_POINTS texts (dims 0: the model's length,
# BENCH_DIMS), then loads Search (limit 10) by a text and by that text's
# vector through bench/loadgen, and the direct request. Prints medians of
# qps, p50 and p99 per side and the ratios.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing or a server cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [4]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    requests in flight on each side [1]
#   BENCH_POINTS         texts in the collection [1000]
#   BENCH_DIMS           the stand-in model's vector length [384]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_EMBED_ADDR     memoryd address [127.0.0.1:50079]
#   BENCH_EMBED_METRICS_ADDR  memoryd's /metrics address [127.0.0.1:50080]
#   BENCH_START_TIMEOUT  seconds a server may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL. protoc encodes the requests; /usr/bin/python3
# runs the stand-in.

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
DURATION=${BENCH_DURATION:-4}
WARMUP=${BENCH_WARMUP:-1}
CONCURRENCY=${BENCH_CONCURRENCY:-1}
POINTS=${BENCH_POINTS:-1000}
DIMS=${BENCH_DIMS:-384}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_EMBED_ADDR:-127.0.0.1:50079}
METRICS_ADDR=${BENCH_EMBED_METRICS_ADDR:-127.0.0.1:50080}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=bazel-bin/service/memoryd
MODEL=bench-embed-$DIMS
QUERY="a note about sailing boats in the harbour"

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"
[ -x /usr/bin/python3 ] || die "/usr/bin/python3 not found"
command -v curl >/dev/null || die "curl not found (Debian: curl)"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$MEMORYD"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/embedder-results-$stamp.jsonl"
MEMORYD_LOG="$WORK/embedder-memoryd-$stamp.log"
STANDIN_LOG="$WORK/embedder-standin-$stamp.log"
MEMORYD_PID=
STANDIN_PID=
COLLECTION=bench_text_$$

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  [ -n "$MEMORYD_PID" ] && call DeleteCollection "{\"name\":\"$COLLECTION\"}" >/dev/null 2>&1
  stop_server memoryd "$MEMORYD_PID"
  stop_server "embedder stand-in" "$STANDIN_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server logs in $OUT/embedder-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# The stand-in on a free port (its first stdout line is "PORT <n>").
mkfifo "$WORK/standin.out"
/usr/bin/python3 tests/contract/embedder_contract_server.py --port 0 --models "$MODEL=$DIMS" \
  --log "$STANDIN_LOG" >"$WORK/standin.out" &
STANDIN_PID=$!
read -r -t "$START_TIMEOUT" word port <"$WORK/standin.out" || die "the embedder stand-in did not start"
[ "$word" = PORT ] || die "the embedder stand-in said '$word $port'"
EMBED_URL=http://127.0.0.1:$port/v1

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant bench-embed \
  --scope "episodic:read episodic:write:all" --ttl 2h) || die "memoryd token mint failed"

"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" --embedder-url "$EMBED_URL" --embedder-model "$MODEL" \
  --metrics-listen "$METRICS_ADDR" \
  >"$MEMORYD_LOG" 2>&1 &
MEMORYD_PID=$!
wait_listening memoryd "$MEMORYD_PID" "$ADDR" "$MEMORYD_LOG"

call() { # METHOD JSON
  scripts/memcall -H "authorization: Bearer $TOKEN" -d "$2" "$ADDR" \
    "memory.v1.EpisodicMemory/$1"
}

# Seeding: texts of a few words each from a small vocabulary, so queries
# have near neighbours.
call CreateCollection "{\"name\":\"$COLLECTION\",\"dims\":0,\"distance\":\"DISTANCE_COSINE\"}" \
  >/dev/null || die "CreateCollection failed"
words=(sailing boats harbour rain mountain coffee report budget tax garden fox river train
  music paper lamp window winter summer ticket)
for ((at = 0; at < POINTS; at += 100)); do
  pts=
  for ((i = at; i < at + 100 && i < POINTS; i++)); do
    t="note $i about ${words[i % 20]} and ${words[(i * 7 + 3) % 20]} near the ${words[(i * 13 + 5) % 20]}"
    pts="$pts${pts:+,}{\"id\":{\"num\":$((i + 1))},\"text\":\"$t\",\"payload\":{\"text\":\"$t\"}}"
  done
  call Upsert "{\"collection\":\"$COLLECTION\",\"points\":[$pts]}" >/dev/null ||
    die "seeding Upsert failed"
done

encode() { # FILE TEXTPROTO
  printf '%s\n' "$2" | protoc -I protos -I /usr/include \
    --encode=memory.v1.EpisodicMemorySearchRequest memory/v1/episodic_memory.proto \
    >"$WORK/$1" || die "protoc could not encode $1"
}
encode text "collection: \"$COLLECTION\" text: \"$QUERY\" limit: 10"
# The same query as the vector the embedder gives for it.
vector=$(/usr/bin/python3 - "$EMBED_URL" "$MODEL" "$QUERY" <<'PY'
import json, sys, urllib.request
url, model, text = sys.argv[1:]
req = urllib.request.Request(url + "/embeddings", json.dumps(
    {"model": model, "input": [text], "encoding_format": "float"}).encode(),
    {"Content-Type": "application/json"})
v = json.load(urllib.request.urlopen(req))["data"][0]["embedding"]
print(" ".join(f"vector: {x!r}" for x in v))
PY
) || die "could not ask the stand-in for the query's vector"
encode vector "collection: \"$COLLECTION\" $vector limit: 10"

# The embedder's request count and summed seconds, as memoryd measured them.
exchanges() {
  curl -s "http://$METRICS_ADDR/metrics" | awk '/backend="embedder"/ &&
    /request_duration_seconds_sum/ { s = $NF } /backend="embedder"/ &&
    /request_duration_seconds_count/ { n = $NF } END { print n + 0, s + 0 }'
}

via_memoryd() { # text|vector
  local before after
  [ "$1" = text ] && before=$(exchanges)
  "$LOADGEN" --target "$ADDR" --method /memory.v1.EpisodicMemory/Search \
    --request-file "$WORK/$1" --header "authorization: Bearer $TOKEN" --duration "$DURATION" \
    --warmup "$WARMUP" --concurrency "$CONCURRENCY" --channels 1 --expect-code 0 \
    --label "memoryd-$1" | tee -a "$WORK/loadgen.out" | grep '^{' >>"$RESULTS"
  if [ "$1" = text ]; then
    after=$(exchanges)
    # shellcheck disable=SC2086  # two numbers each
    set -- $before $after
    awk -v n0="$1" -v s0="$2" -v n1="$3" -v s1="$4" 'BEGIN { if (n1 > n0)
      printf "{\"label\":\"exchange\",\"mean_us\":%.1f}\n", (s1 - s0) / (n1 - n0) * 1e6 }' \
      >>"$RESULTS"
  fi
}
direct() {
  /usr/bin/python3 bench/embed_direct.py --url "$EMBED_URL" --model "$MODEL" --text "$QUERY" \
    --duration "$DURATION" --warmup "$WARMUP" --threads "$CONCURRENCY" --label direct-embed |
    grep '^{' >>"$RESULTS"
}

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$ROUNDS rounds x ${DURATION}s (+${WARMUP}s warm-up), $CONCURRENCY in flight per side," \
  "$POINTS texts of $DIMS dimensions, memoryd --workers $SERVER_THREADS"
for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  if ((r % 2)); then via_memoryd text; via_memoryd vector; direct; else
    direct; via_memoryd vector; via_memoryd text; fi
done

median_table "EpisodicMemory.Search (limit 10) by text and by vector, c=$CONCURRENCY:" side \
  memoryd-text memoryd-vector direct-embed
text=$(median memoryd-text mean_us)
vec=$(median memoryd-vector mean_us)
xch=$(median exchange mean_us)
added=$(awk -v t="$text" -v v="$vec" 'BEGIN { printf "%.1f", t - v }')
own=$(awk -v a="$added" -v x="$xch" 'BEGIN { printf "%.1f", a - x }')
echo "means: text $text us, vector $vec us, one embeddings request as memoryd timed it $xch us"
ratio_line "Search by text adds $added us (mean) to the vector search: the embeddings request" \
  "$xch us (the stand-in and the wire; made directly: p50 $(median direct-embed p50_us) us)" \
  "and $own us of memoryd's own; text/vector p50 x$(ratio "$(median memoryd-text p50_us)" \
  "$(median memoryd-vector p50_us)")"
exit 0
