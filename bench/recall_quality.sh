#!/usr/bin/env bash
# bench/recall_quality.sh: how well text recall finds the turn that answers
# a question (quality, not speed): memoryd's lexical search alone, vector
# search alone and hybrid, beside a textbook BM25 the bench computes over
# the same corpus.
#
# bench/recall_quality.py builds a labelled corpus of its own from a fixed
# seed (multi-session dialogues, BENCH_QUALITY_TURNS turns, one point each,
# and BENCH_QUALITY_QUESTIONS questions whose evidence turn shares only
# some of their words: paraphrase, inflection, names, dates; its header
# says how), loads it into two memoryds and asks every question once
# (EpisodicMemory.Search, limit 10):
#   lexical   a memoryd without an embedder, SEARCH_MODE_LEXICAL;
#   vector    a memoryd whose embedder is the embedder contract stand-in
#             (tests/contract/embedder_contract_server.py: a hashed bag of
#             words, not a model), SEARCH_MODE_VECTOR;
#   hybrid    the same memoryd, SEARCH_MODE_HYBRID;
#   textbook  Okapi BM25 in the bench (k1 1.2, b 0.75, no stemming, no stop
#             words).
# Prints recall@1/5/10 and MRR (over the top 10) per side, recall@10 by how
# many words a question shares with its evidence, three questions lexical
# search missed, and the ratio memoryd lexical / textbook recall@10 (the
# issue's goal: >= 1).
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails, a server cannot start or
# the corpus cannot be loaded.
#
# Environment (defaults in brackets):
#   BENCH_QUALITY_TURNS      turns in the corpus, 200 a dialogue [10000]
#   BENCH_QUALITY_QUESTIONS  questions asked [300]
#   BENCH_QUALITY_SEED       the corpus's seed [1]
#   BENCH_DIMS               the stand-in model's vector length [384]
#   BENCH_SERVER_THREADS     memoryd --workers [2]
#   BENCH_QUALITY_ADDR       memoryd without an embedder [127.0.0.1:50081]
#   BENCH_QUALITY_EMBED_ADDR memoryd with the stand-in [127.0.0.1:50082]
#   BENCH_START_TIMEOUT      seconds a server may take to listen [30]
#   BENCH_OUT                directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1       do not run bazel build first
#   MEMORYD_BIN              memoryd binary [bazel-bin/service/memoryd]
# .local/env (scripts/devstack.sh) must provide MEMORYD_PG_URL.
# /usr/bin/python3 with Debian's python3-grpcio, python3-protobuf and
# python3-jsonschema (the stand-in) runs the Python sides; protoc
# (protobuf-compiler) compiles the protos they call memoryd with.

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

TURNS=${BENCH_QUALITY_TURNS:-10000}
QUESTIONS=${BENCH_QUALITY_QUESTIONS:-300}
SEED=${BENCH_QUALITY_SEED:-1}
DIMS=${BENCH_DIMS:-384}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
LEX_ADDR=${BENCH_QUALITY_ADDR:-127.0.0.1:50081}
EMBED_ADDR=${BENCH_QUALITY_EMBED_ADDR:-127.0.0.1:50082}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}
MODEL=bench-embed-$DIMS
COLLECTION=recall_quality_$$

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
for n in "$TURNS" "$QUESTIONS" "$SEED" "$DIMS"; do
  case $n in '' | *[!0-9]* | 0) die "BENCH_QUALITY_TURNS, _QUESTIONS, _SEED and BENCH_DIMS must be positive integers" ;; esac
done
case $START_TIMEOUT in '' | *[!0-9]*) die "BENCH_START_TIMEOUT must be whole seconds" ;; esac
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"
[ -x /usr/bin/python3 ] || die "/usr/bin/python3 not found"
/usr/bin/python3 -c 'import grpc, google.protobuf, jsonschema' 2>/dev/null ||
  die "/usr/bin/python3 lacks grpc, protobuf or jsonschema (Debian: python3-grpcio python3-protobuf python3-jsonschema; make deps)"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //service:memoryd || die "bazel build //service:memoryd failed"
fi
for bin in "$MEMORYD" "$MEMCALL"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
for addr in "$LEX_ADDR" "$EMBED_ADDR"; do
  can_connect "$addr" && die "$addr is already in use (a stale server?)"
done

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/quality-results-$stamp.jsonl"
LEX_LOG="$WORK/quality-lexical-memoryd-$stamp.log"
EMBED_LOG="$WORK/quality-embed-memoryd-$stamp.log"
STANDIN_LOG="$WORK/quality-standin-$stamp.log"
LEX_PID=
EMBED_PID=
STANDIN_PID=
TOKEN=

# drop ADDR NAME: deletes a collection of this run (quietly: it may not exist).
# shellcheck disable=SC2317  # invoked by the EXIT trap
drop() {
  [ -n "$TOKEN" ] || return 0
  "$MEMCALL" -max-time 30 -H "authorization: Bearer $TOKEN" -d "{\"name\":\"$2\"}" "$1" \
    memory.v1.EpisodicMemory/DeleteCollection >/dev/null 2>&1
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  [ -n "$LEX_PID" ] && drop "$LEX_ADDR" "${COLLECTION}_lexical"
  [ -n "$EMBED_PID" ] && drop "$EMBED_ADDR" "${COLLECTION}_embed"
  stop_server "memoryd (lexical)" "$LEX_PID"
  stop_server "memoryd (embedder)" "$EMBED_PID"
  stop_server "embedder stand-in" "$STANDIN_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/quality-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server logs in $OUT/quality-*-$stamp.*" >&2
  else
    echo "bench: could not copy results to $OUT" >&2
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
# One tenant per run; write:all also lets the exit trap delete the collections.
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent \
  --tenant "bench-quality-$stamp-$$" --scope "episodic:read episodic:write:all" \
  --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"

"$MEMORYD" --listen "$LEX_ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" >"$LEX_LOG" 2>&1 &
LEX_PID=$!
"$MEMORYD" --listen "$EMBED_ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" --embedder-url "$EMBED_URL" --embedder-model "$MODEL" \
  >"$EMBED_LOG" 2>&1 &
EMBED_PID=$!
wait_listening "memoryd (lexical)" "$LEX_PID" "$LEX_ADDR" "$LEX_LOG"
wait_listening "memoryd (embedder)" "$EMBED_PID" "$EMBED_ADDR" "$EMBED_LOG"

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); memoryd" \
  "--workers $SERVER_THREADS: $LEX_ADDR without an embedder, $EMBED_ADDR with the stand-in" \
  "($MODEL)"
t0=$SECONDS
BENCH_QUALITY_TOKEN=$TOKEN /usr/bin/python3 bench/recall_quality.py --lexical "$LEX_ADDR" \
  --embed "$EMBED_ADDR" --turns "$TURNS" --questions "$QUESTIONS" --seed "$SEED" \
  --collection "$COLLECTION" >"$WORK/quality-out-$stamp.txt"
rc=$?
grep -v '^{' "$WORK/quality-out-$stamp.txt" | grep -v '^lexical/textbook recall@10:'
grep '^{' "$WORK/quality-out-$stamp.txt" >>"$RESULTS"
for s in "lexical:$LEX_PID:$LEX_LOG" "embedder:$EMBED_PID:$EMBED_LOG"; do
  IFS=: read -r name pid log <<<"$s"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "bench: memoryd ($name) died during the run" >&2
    log_tail "$log"
    exit 1
  fi
done
[ "$rc" = 0 ] || die "recall_quality.py failed (exit $rc): the corpus could not be loaded"
line=$(grep '^lexical/textbook recall@10:' "$WORK/quality-out-$stamp.txt")
[ -n "$line" ] && ratio_line "$line"
echo "bench: the run took $((SECONDS - t0))s"
exit 0
