#!/usr/bin/env bash
# bench/episodic.sh: the embedded episodic index's exact search vs FAISS,
# in-process and through memoryd, in the same run.
#
# 1. In-process (bench/episodic_bench local): builds BENCH_VECTORS unit
#    vectors of BENCH_DIMS dims (gaussian clusters, fixed seed) into the
#    embedded index (//service/episodic:index) and into FAISS IndexFlatIP /
#    IndexFlatL2 (Debian's libfaiss), checks that both give the same top-k
#    (recall@k of ours vs FAISS), then times single-query search (one
#    thread, k = BENCH_K) of the raw episodic_index_search against FAISS, DOT vs IP
#    and EUCLID vs L2, in alternating rounds. Target: raw within 1.5x of
#    FAISS's time per query.
# 2. Through memoryd (bench/episodic_bench server; skipped with
#    BENCH_SKIP_SERVER=1): starts memoryd on the dev PostgreSQL, mints an
#    episodic:* token, creates a DOT and a EUCLID collection, upserts the
#    same vectors in batches of BENCH_UPSERT_BATCH, times the first Search
#    (the index loads from PostgreSQL), checks recall@k against FAISS, then
#    measures EpisodicMemory.Search (limit BENCH_K) at each concurrency of
#    BENCH_CONCURRENCY; deletes both collections at the end. If memoryd
#    does not serve EpisodicMemory yet (UNIMPLEMENTED), its rows are
#    skipped with that reason and the in-process figures still print.
#
# Prints median qps / p50 / p99 per side, the ratios raw/FAISS (time per
# query) and memoryd/raw, recall@k, upload rate and index load time.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_VECTORS        points in the data set [100000]
#   BENCH_DIMS           dimensions [384]
#   BENCH_QUERIES        distinct query vectors, all checked for recall [200]
#   BENCH_K              k / Search limit [10]
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [5]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_BATCH          > 0: also FAISS with this many queries per call
#                        (its BLAS path), reported apart [0]
#   BENCH_CONCURRENCY    memoryd Search calls in flight, comma-separated [1,4]
#   BENCH_UPSERT_BATCH   points per Upsert [500]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_MEMORYD_ARGS   extra memoryd flags (word-split) []
#   BENCH_EPISODIC_ADDR  memoryd address [127.0.0.1:50076]
#   BENCH_SKIP_SERVER=1  in-process comparison only: no memoryd, no PostgreSQL
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
#   MEMORYD_BIN, EPISODIC_BENCH_BIN   override the tool paths
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL unless BENCH_SKIP_SERVER=1.

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

VECTORS=${BENCH_VECTORS:-100000}
DIMS=${BENCH_DIMS:-384}
QUERIES=${BENCH_QUERIES:-200}
K=${BENCH_K:-10}
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-5}
WARMUP=${BENCH_WARMUP:-1}
BATCH=${BENCH_BATCH:-0}
CONCURRENCY=${BENCH_CONCURRENCY:-1,4}
UPSERT_BATCH=${BENCH_UPSERT_BATCH:-500}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_EPISODIC_ADDR:-127.0.0.1:50076}
SKIP_SERVER=${BENCH_SKIP_SERVER:-0}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
BENCH=${EPISODIC_BENCH_BIN:-bazel-bin/bench/episodic_bench}
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}

case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
if [ "$SKIP_SERVER" != 1 ]; then
  [ -n "${MEMORYD_PG_URL:-}" ] ||
    die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start, or BENCH_SKIP_SERVER=1)"
fi

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  targets=(//bench:episodic_bench)
  [ "$SKIP_SERVER" = 1 ] || targets+=(//service:memoryd)
  bazel build "${targets[@]}" || die "bazel build failed"
fi
tools=("$BENCH")
[ "$SKIP_SERVER" = 1 ] || tools+=("$MEMORYD")
for bin in "${tools[@]}"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
if [ "$SKIP_SERVER" != 1 ]; then
  can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"
fi

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/episodic-results-$stamp.jsonl"
BENCH_LOG="$WORK/episodic-bench-$stamp.out"
MEMORYD_LOG="$WORK/episodic-memoryd-$stamp.log"
MEMORYD_PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$MEMORYD_PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/episodic-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and logs in $OUT/episodic-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

data_args=(--vectors "$VECTORS" --dims "$DIMS" --queries "$QUERIES" --k "$K"
  --rounds "$ROUNDS" --duration "$DURATION" --warmup "$WARMUP")
avx2=no
grep -qw avx2 /proc/cpuinfo && avx2=yes
echo "bench: $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1)," \
  "AVX2 $avx2), load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$VECTORS x $DIMS dims, k=$K, $QUERIES queries; $ROUNDS rounds x ${DURATION}s" \
  "(+${WARMUP}s warm-up) per side"

# run_bench MODE [args...]: episodic_bench's lines to the log, its JSON
# lines to RESULTS (its stderr, progress and errors, to the terminal).
# Returns episodic_bench's exit status.
run_bench() {
  "$BENCH" "$@" | tee -a "$BENCH_LOG" | grep '^{' >>"$RESULTS"
  return "${PIPESTATUS[0]}"
}

vs() { # A B: "xA/B", or n/a when a side has no figure
  local r
  r=$(ratio "$1" "$2")
  if [ "$r" = nan ]; then echo "n/a"; else echo "x$r"; fi
}
# value LABEL KEY: the field of LABEL's (single) line, or n/a.
value() {
  local v
  v=$(sed -n "s/.*\"label\":\"$1\".*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p" "$RESULTS" | head -n1)
  echo "${v:-n/a}"
}

# 1. In-process. memoryd is not running yet: nothing else competes for the
# cores.
LOCAL_SKIP=
run_bench local "${data_args[@]}" --batch "$BATCH"
rc=$?
if ((rc != 0)); then
  LOCAL_SKIP="episodic_bench local failed (exit $rc; its message is above)"
  echo "bench: NOTE: $LOCAL_SKIP" >&2
fi

# 2. Through memoryd.
SERVER_SKIP=
if [ "$SKIP_SERVER" = 1 ]; then
  SERVER_SKIP="BENCH_SKIP_SERVER=1"
else
  KEYS="$WORK/keys"
  mkdir -p "$KEYS"
  "$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
    >/dev/null || die "memoryd token keygen failed"
  TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant bench \
    --scope "episodic:*" --clr PUBLIC --ttl 2h) || die "memoryd token mint failed"
  # shellcheck disable=SC2086  # BENCH_MEMORYD_ARGS is a list of flags
  "$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
    --pg-url "$MEMORYD_PG_URL" ${BENCH_MEMORYD_ARGS:-} >"$MEMORYD_LOG" 2>&1 &
  MEMORYD_PID=$!
  wait_listening memoryd "$MEMORYD_PID" "$ADDR" "$MEMORYD_LOG"
  echo "bench: memoryd on $ADDR, --workers $SERVER_THREADS; Search at concurrency $CONCURRENCY" >&2
  # The token goes through the environment, not argv (ps shows argv).
  BENCH_TOKEN=$TOKEN run_bench server --target "$ADDR" "${data_args[@]}" \
    --concurrency "$CONCURRENCY" --upsert-batch "$UPSERT_BATCH"
  rc=$?
  if ((rc != 0)); then
    # episodic_bench names the failed call in a "server-error" line.
    call=$(value server-error call)
    status=$(grep '"label":"server-error"' "$RESULTS" | sed -n 's/.*"status":"\([A-Z_]*\)".*/\1/p')
    message=$(grep '"label":"server-error"' "$RESULTS" | sed -n 's/.*"message":"\(.*\)"}$/\1/p')
    if ((rc == 3)); then
      SERVER_SKIP="memoryd does not serve EpisodicMemory yet ($call: $status: $message)"
    elif [ -n "$status" ]; then
      SERVER_SKIP="$call failed: $status: $message"
    else
      SERVER_SKIP="episodic_bench server failed (exit $rc; its message is above)"
    fi
    echo "bench: NOTE: skipping the memoryd rows: $SERVER_SKIP" >&2
  fi
fi

echo
echo "Exact top-$K search, $VECTORS x $DIMS-dim vectors, one query per call:"
row="%-28s %5s %12s %10s %10s %8s\n"
# shellcheck disable=SC2059
printf "$row" side runs "median qps" "p50 us" "p99 us" errors
sides="raw-dot faiss-ip raw-euclid faiss-l2"
((BATCH > 0)) && sides="$sides faiss-ip-batch faiss-l2-batch"
if [ -z "$SERVER_SKIP" ]; then
  for c in ${CONCURRENCY//,/ }; do sides="$sides memoryd-dot-c$c memoryd-euclid-c$c"; done
fi
for l in $sides; do
  case $l in
    raw-dot) name="raw episodic_index_search DOT"; skip=$LOCAL_SKIP ;;
    faiss-ip) name="FAISS IndexFlatIP"; skip=$LOCAL_SKIP ;;
    raw-euclid) name="raw episodic_index_search EUCLID"; skip=$LOCAL_SKIP ;;
    faiss-l2) name="FAISS IndexFlatL2"; skip=$LOCAL_SKIP ;;
    faiss-ip-batch) name="FAISS IP, $BATCH queries/call"; skip=$LOCAL_SKIP ;;
    faiss-l2-batch) name="FAISS L2, $BATCH queries/call"; skip=$LOCAL_SKIP ;;
    memoryd-dot-c*) name="memoryd Search DOT, c=${l##*-c}"; skip= ;;
    memoryd-euclid-c*) name="memoryd Search EUCLID, c=${l##*-c}"; skip= ;;
  esac
  if [ -n "$skip" ]; then
    printf "%-28s skipped: %s\n" "$name" "$skip"
    continue
  fi
  # shellcheck disable=SC2059
  printf "$row" "$name" "$(field "$l" qps | wc -l)" "$(median "$l" qps)" \
    "$(median "$l" p50_us)" "$(median "$l" p99_us)" "$(total "$l" errors)"
done
[ -z "$SERVER_SKIP" ] || printf "%-28s skipped: %s\n" "memoryd Search" "$SERVER_SKIP"
((BATCH > 0)) && echo "(batched rows: qps counts queries, p50/p99 are per call of $BATCH queries)"

echo
# Time per query = 1/qps: raw/FAISS below 1 means the raw search is faster.
for pair in "dot faiss-ip DOT/IndexFlatIP" "euclid faiss-l2 EUCLID/IndexFlatL2"; do
  read -r d f what <<<"$pair"
  ratio_line "raw/FAISS $what: time per query $(vs "$(median "$f" qps)" "$(median "raw-$d" qps)")," \
    "p50 $(vs "$(median "raw-$d" p50_us)" "$(median "$f" p50_us)") (target <= 1.5, lower is better)"
done
if [ -z "$SERVER_SKIP" ]; then
  for c in ${CONCURRENCY//,/ }; do
    for d in dot euclid; do
      ratio_line "EpisodicMemory.Search memoryd/raw ${d^^} c=$c: p50 $(vs "$(median "memoryd-$d-c$c" p50_us)" \
        "$(median "raw-$d" p50_us)"), qps $(vs "$(median "memoryd-$d-c$c" qps)" \
        "$(median "raw-$d" qps)") (raw: one thread, in-process)"
    done
  done
fi

echo
for l in recall-dot recall-euclid recall-memoryd-dot recall-memoryd-euclid; do
  [ -n "$(field "$l" recall)" ] || continue
  echo "$l: recall@$K vs $(value "$l" vs) $(value "$l" recall) ($(value "$l" recall_ties) up to ties)," \
    "$(value "$l" identical)/$(value "$l" queries) queries identical"
done
for d in dot euclid; do
  l=memoryd-setup-$d
  [ -n "$(field "$l" upload_s)" ] || continue
  echo "memoryd ${d^^}: Upsert of $VECTORS points in batches of $UPSERT_BATCH" \
    "$(value "$l" upload_s)s ($(value "$l" upload_pps) points/s); first Search" \
    "$(value "$l" first_search_ms) ms (index load from PostgreSQL), then p50" \
    "$(value "$l" warm_search_ms) ms"
done
exit 0
