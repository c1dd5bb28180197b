#!/usr/bin/env bash
# bench/ranked.sh: what a ranked text query (TEXT_MATCH_RANKED: BM25 over
# stored, GIN-indexed documents, tier/tier_sql_rank.h) costs through
# memoryd, beside the strict match of the same method (Entries.Search's
# substring on its trigram index, QueryEntities' web-search query) and
# Entries.Read (one row by key: the PostgreSQL round trip's floor), in the
# same run, alternating rounds.
#
# Seeds BENCH_RANKED_ROWS entries and as many entities in one tenant
# straight into PostgreSQL (texts of 10 to 40 words from a 2000-word
# vocabulary, skewed towards its first words, as bench/recall.sh's), then
# loads each side with an 8-word question of rare and common words
# (ranked) or one of its words (strict).
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS         rounds per side [3]
#   BENCH_DURATION       measured seconds per round [3]
#   BENCH_WARMUP         unmeasured seconds before each round [1]
#   BENCH_CONCURRENCY    calls in flight on each side [1]
#   BENCH_RANKED_ROWS    entries and entities seeded [10000]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_RANKED_ADDR    memoryd address [127.0.0.1:50083]
#   BENCH_START_TIMEOUT  seconds memoryd may take to listen [30]
#   BENCH_OUT            directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1   do not run bazel build first
# .local/env (scripts/devstack.sh) must provide MEMORYD_PG_URL; psql and
# protoc (Debian's postgresql-client, protobuf-compiler) are used.

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
ROWS=${BENCH_RANKED_ROWS:-10000}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_RANKED_ADDR:-127.0.0.1:50083}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
command -v protoc >/dev/null || die "protoc not found (Debian: protobuf-compiler)"
command -v psql >/dev/null || die "psql not found (Debian: postgresql-client)"
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
case $ROWS in '' | *[!0-9]* | 0) die "BENCH_RANKED_ROWS must be a positive integer" ;; esac

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$MEMORYD"; do [ -x "$bin" ] || die "$bin: not found or not executable"; done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/ranked-results-$stamp.jsonl"
LOG="$WORK/ranked-memoryd-$stamp.log"
TENANT="bench-ranked-$stamp-$$"
PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$PID"
  psql "$MEMORYD_PG_URL" -q -v tenant="$TENANT" >/dev/null 2>&1 <<'SQL'
DELETE FROM entries WHERE tenant = :'tenant';
DELETE FROM entities WHERE tenant = :'tenant';
SQL
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/ranked-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/ranked-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TOKEN=$("$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant "$TENANT" \
  --scope "entries:read global:read" --ns 'bench:*:*' --clr PUBLIC --ttl 2h) ||
  die "memoryd token mint failed"
AUTH="authorization: Bearer $TOKEN"

# memoryd first: its migrations give the tables their document columns.
"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --workers "$SERVER_THREADS" \
  --pg-url "$MEMORYD_PG_URL" >"$LOG" 2>&1 &
PID=$!
wait_listening memoryd "$PID" "$ADDR" "$LOG"

echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench: seeding $ROWS entries and $ROWS entities" >&2
# The documents as memoryd's writes make them (english, the default
# --text-language); texts as a fixed seed draws them.
psql "$MEMORYD_PG_URL" -q -v ON_ERROR_STOP=1 -v tenant="$TENANT" -v n="$ROWS" >/dev/null <<'SQL' ||
SELECT setseed(0.5);
CREATE TEMP TABLE texts AS
SELECT g, string_agg('w' || floor(2000 * power(random(), 3))::int, ' ') AS t
FROM generate_series(1, :n) g CROSS JOIN LATERAL generate_series(1, 10 + (g % 31)) j GROUP BY g;
INSERT INTO entries (tenant, namespace, key, owner, label, value, compressed, size_bytes,
  content_type, search_text, search_doc, version, created_at, updated_at)
SELECT :'tenant', 'bench:notes:x', 'k' || g, 'bench-agent', 1, convert_to(t, 'UTF8'), false,
  length(t), 'text/plain', lower('k' || g || ' ' || t), to_tsvector('english', 'k' || g || ' ' || t),
  1, now(), now() FROM texts;
INSERT INTO entities (tenant, id, owner, label, entity_type, name, properties, pii_kinds, version,
  created_at, updated_at, rank_doc)
SELECT :'tenant', 'e' || g, 'bench-agent', 1, 'note', 'note ' || g, jsonb_build_object('text', t),
  '{}', 1, now(), now(), to_tsvector('english', 'note ' || g) || to_tsvector('english', t)
FROM texts;
ANALYZE entries;
ANALYZE entities;
SQL
  die "seeding PostgreSQL failed"

encode() { # FILE PROTO TYPE TEXT
  printf '%s\n' "$4" | protoc -I protos -I /usr/include --encode="$3" "memory/v1/$2" \
    >"$WORK/$1" || die "protoc could not encode $3"
}
Q='w3 w17 w250 w900 w1200 w5 w40 w1500'
encode ranked entries.proto memory.v1.EntriesSearchRequest \
  "term: \"$Q\" match: TEXT_MATCH_RANKED limit: 10"
# The same question without its three commonest words (w3, w5, w17 are in
# nearly every text, as stop words would be): fewer candidates.
encode ranked_rare entries.proto memory.v1.EntriesSearchRequest \
  'term: "w250 w900 w1200 w40 w1500" match: TEXT_MATCH_RANKED limit: 10'
encode strict entries.proto memory.v1.EntriesSearchRequest 'term: "w17 " limit: 10'
encode read entries.proto memory.v1.EntriesReadRequest 'namespace: "bench:notes:x" key: "k42"'
encode entities_ranked global_memory.proto memory.v1.QueryEntitiesRequest \
  "text_query: \"$Q\" text_match: TEXT_MATCH_RANKED page_size: 10"
encode entities_strict global_memory.proto memory.v1.QueryEntitiesRequest \
  'text_query: "w17" page_size: 10'

method_of() {
  case $1 in
    ranked | ranked_rare | strict) echo /memory.v1.Entries/Search ;;
    read) echo /memory.v1.Entries/Read ;;
    *) echo /memory.v1.GlobalMemory/QueryEntities ;;
  esac
}
side() { # label
  "$LOADGEN" --target "$ADDR" --method "$(method_of "$1")" --request-file "$WORK/$1" \
    --header "$AUTH" --duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONCURRENCY" \
    --expect-code 0 --label "$1" | tee -a "$WORK/ranked-loadgen-$stamp.out" |
    grep '^{' >>"$RESULTS"
}

SIDES="ranked ranked_rare strict read entities_ranked entities_strict"
for ((r = 1; r <= ROUNDS; r++)); do
  echo "bench: round $r/$ROUNDS" >&2
  order=$SIDES
  ((r % 2)) || order=$(tr ' ' '\n' <<<"$SIDES" | tac | tr '\n' ' ')
  for s in $order; do side "$s"; done
done

# shellcheck disable=SC2086
median_table "Through memoryd, $ROWS rows each, $CONCURRENCY in flight (medians of $ROUNDS rounds):" \
  side $SIDES
rp=$(median ranked p50_us) sp=$(median strict p50_us) dp=$(median read p50_us)
ratio_line "Entries.Search ranked / strict (substring), p50: $(ratio "$rp" "$sp")"
ratio_line "Entries.Search ranked / Entries.Read, p50: $(ratio "$rp" "$dp")"
ratio_line "Entries.Search ranked, rarer words / strict, p50: $(ratio "$(median ranked_rare p50_us)" "$sp")"
ratio_line "QueryEntities ranked / strict, p50: $(ratio "$(median entities_ranked p50_us)" \
  "$(median entities_strict p50_us)")"
