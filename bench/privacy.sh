#!/usr/bin/env bash
# bench/privacy.sh: Privacy.Forget of a data subject with about 10k records
# spread over every tier, and what it does to other tenants' reads.
#
# Starts memoryd on the dev PostgreSQL and Redis. Each round loads, for a
# fresh subject of tenant A: BENCH_ENTITIES entities, BENCH_RELS
# relationships between them, BENCH_TASKS tasks and BENCH_ENTRIES entries
# (written straight into PostgreSQL with psql, as memoryd stores them),
# BENCH_POINTS episodic points (EpisodicMemory.Upsert, 50 a call), and
# BENCH_ITEMS blackboard items and BENCH_CACHED cache values (Post and Set,
# 8 calls at a time), every one tagged with the subject. Then:
#   before   tenant B's GetEntity (PostgreSQL) with BENCH_CONCURRENCY calls
#            in flight for BENCH_DURATION s, nothing else running
#   dry      Forget of A's subject with dry_run (counts only)
#   during   the same load of B, with Forget of A's subject (real) started
#            half a second into it
# Prints per round the counts and memoryd's own duration of both Forget
# calls (its log line), and the medians over rounds: Forget's wall time
# (goal < 1 s for 10k records), B's p99 before and during, and the ratio.
#
# Exit status: 0 whenever the benchmark ran (benchmarks never fail the
# build); 1 if a tool is missing, the build fails or memoryd cannot start.
#
# Environment (defaults in brackets):
#   BENCH_ROUNDS        rounds [3]
#   BENCH_DURATION      measured seconds of B's load per side [3]
#   BENCH_CONCURRENCY   B's calls in flight [4]
#   BENCH_ENTITIES [3000] BENCH_RELS [2000] BENCH_TASKS [1000]
#   BENCH_ENTRIES [2000] BENCH_POINTS [1500] BENCH_ITEMS [300] BENCH_CACHED [200]
#   BENCH_SERVER_THREADS memoryd --workers [2]
#   BENCH_PRIVACY_ADDR  memoryd address [127.0.0.1:50078]
#   BENCH_START_TIMEOUT seconds memoryd may take to listen [30]
#   BENCH_OUT           directory for logs and results [.local/bench]
#   BENCH_SKIP_BUILD=1  do not run bazel build first
#   MEMORYD_BIN, MEMCALL_BIN   override the tool paths
# .local/env (written by scripts/devstack.sh, which `make bench` runs) must
# provide MEMORYD_PG_URL and MEMORYD_REDIS_URL. protoc encodes B's request.

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
CONCURRENCY=${BENCH_CONCURRENCY:-4}
ENTITIES=${BENCH_ENTITIES:-3000}
RELS=${BENCH_RELS:-2000}
TASKS=${BENCH_TASKS:-1000}
ENTRIES=${BENCH_ENTRIES:-2000}
POINTS=${BENCH_POINTS:-1500}
ITEMS=${BENCH_ITEMS:-300}
CACHED=${BENCH_CACHED:-200}
SERVER_THREADS=${BENCH_SERVER_THREADS:-2}
ADDR=${BENCH_PRIVACY_ADDR:-127.0.0.1:50078}
START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
OUT=${BENCH_OUT:-.local/bench}
LOADGEN=bazel-bin/bench/loadgen
MEMORYD=${MEMORYD_BIN:-bazel-bin/service/memoryd}
MEMCALL=${MEMCALL_BIN:-scripts/memcall}

[ -n "${MEMORYD_PG_URL:-}" ] || die "MEMORYD_PG_URL is not set (run: bash scripts/devstack.sh start)"
[ -n "${MEMORYD_REDIS_URL:-}" ] || die "MEMORYD_REDIS_URL is not set (run: bash scripts/devstack.sh start)"
for tool in protoc psql xargs; do command -v $tool >/dev/null || die "$tool not found"; done
case $ROUNDS in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a positive integer" ;; esac
((RELS <= ENTITIES)) || die "BENCH_RELS must not exceed BENCH_ENTITIES"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  bazel build //bench:loadgen //service:memoryd || die "bazel build failed"
fi
for bin in "$LOADGEN" "$MEMORYD" "$MEMCALL"; do
  [ -x "$bin" ] || die "$bin: not found or not executable"
done
can_connect "$ADDR" && die "$ADDR is already in use (a stale server?)"

stamp=$(date +%Y%m%d-%H%M%S)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-bench.XXXXXX") || die "mktemp failed"
RESULTS="$WORK/privacy-results-$stamp.jsonl"
LOG="$WORK/privacy-memoryd-$stamp.log"
PID=

# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() {
  stop_server memoryd "$PID"
  if mkdir -p "$OUT" 2>/dev/null && cp "$WORK"/privacy-* "$OUT"/ 2>/dev/null; then
    echo "bench: results and server log in $OUT/privacy-*-$stamp.*" >&2
  fi
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

KEYS="$WORK/keys"
mkdir -p "$KEYS"
"$MEMORYD" token keygen --kid bench-1 --private "$KEYS/bench.jwk" --jwks "$KEYS/jwks.json" \
  >/dev/null || die "memoryd token keygen failed"
TENANT_A="bench-privacy-a-$stamp-$$"
TENANT_B="bench-privacy-b-$stamp-$$"
mint() { # TENANT
  "$MEMORYD" token mint --key "$KEYS/bench.jwk" --sub bench-agent --tenant "$1" \
    --scope "global:* episodic:* entries:* cache:* blackboard:* privacy:forget:all" \
    --ns '*:*:*' --clr SECRET --ttl 2h || die "memoryd token mint failed"
}
AUTH_A="authorization: Bearer $(mint "$TENANT_A")"
AUTH_B="authorization: Bearer $(mint "$TENANT_B")"

"$MEMORYD" --listen "$ADDR" --jwks "$KEYS/jwks.json" --signing-key "$KEYS/bench.jwk" \
  --workers "$SERVER_THREADS" --pg-url "$MEMORYD_PG_URL" --redis-url "$MEMORYD_REDIS_URL" \
  >"$LOG" 2>&1 &
PID=$!
wait_listening memoryd "$PID" "$ADDR" "$LOG"

memcall() { # AUTH METHOD JSON
  "$MEMCALL" -max-time 60 -H "$1" -d "$3" "$ADDR" "$2" 2>"$WORK/memcall.err" ||
    die "$2 failed: $(cat "$WORK/memcall.err")"
}
export MEMCALL ADDR

memcall "$AUTH_B" memory.v1.GlobalMemory/PutEntity '{"id":"b-1","type":"doc","name":"other"}' >/dev/null
memcall "$AUTH_A" memory.v1.EpisodicMemory/CreateCollection \
  '{"name":"bench","dims":8,"distance":"DISTANCE_COSINE"}' >/dev/null
printf 'id: "b-1"\n' | protoc -I protos -I /usr/include --encode=memory.v1.GetEntityRequest \
  memory/v1/global_memory.proto >"$WORK/get-b" || die "protoc could not encode the request"

# seed SUBJECT ROUND: every record of SUBJECT in tenant A.
seed() {
  local s=$1 r=$2
  psql -q -v ON_ERROR_STOP=1 -v t="$TENANT_A" -v s="$s" -v ne="$ENTITIES" -v nr="$RELS" \
    -v nt="$TASKS" -v nn="$ENTRIES" "$MEMORYD_PG_URL" >/dev/null <<'SQL' || die "psql failed"
INSERT INTO entities (tenant, id, owner, label, entity_type, name, properties, version,
                      created_at, updated_at)
  SELECT :'t', 'p-' || :'s' || '-' || g, 'bench-agent', 1, 'person', 'person ' || g,
         jsonb_build_object('subject_id', :'s', 'n', g), 1, now(), now()
  FROM generate_series(1, :ne) g;
INSERT INTO relationships (tenant, source_id, rel_type, target_id, owner, label, properties,
                           version, created_at, updated_at)
  SELECT :'t', 'p-' || :'s' || '-' || g, 'knows', 'p-' || :'s' || '-' || (g % :ne + 1),
         'bench-agent', 1, '{}', 1, now(), now()
  FROM generate_series(1, :nr) g;
INSERT INTO tasks (tenant, id, owner, label, task_type, status, provenance, start_time, version,
                   created_at, updated_at)
  SELECT :'t', 't-' || :'s' || '-' || g, 'bench-agent', 1, 'chat', 3,
         jsonb_build_object('subject_id', :'s'), now(), 1, now(), now()
  FROM generate_series(1, :nt) g;
INSERT INTO entries (tenant, namespace, key, owner, label, value, compressed, size_bytes,
                     content_type, metadata, search_text, version, created_at, updated_at)
  SELECT :'t', 'bench:privacy:x', :'s' || '-' || g, 'bench-agent', 1, 'v'::bytea, false, 1,
         'text/plain', jsonb_build_object('subject_id', :'s'), 'v', 1, now(), now()
  FROM generate_series(1, :nn) g;
SQL
  awk -v n="$POINTS" -v base="$((r * POINTS))" -v s="$s" 'BEGIN {
    srand(base + 7)
    for (b = 0; b < n; b += 50) {
      printf "{\"collection\":\"bench\",\"points\":["
      for (i = b; i < b + 50 && i < n; i++) {
        printf "%s{\"id\":{\"num\":\"%d\"},\"vector\":[", (i > b ? "," : ""), base + i + 1
        for (j = 0; j < 8; j++) printf "%s%.4f", (j ? "," : ""), rand() - 0.5
        printf "],\"payload\":{\"subject_id\":\"%s\"}}", s
      }
      print "]}"
    }
  }' | while read -r body; do memcall "$AUTH_A" memory.v1.EpisodicMemory/Upsert "$body" >/dev/null; done
  # Posts and Sets 8 at a time (each memcall starts a Python interpreter).
  seq 1 "$ITEMS" | xargs -P 8 -I{} "$MEMCALL" -max-time 60 -H "$AUTH_A" \
    -d "{\"taskId\":\"board-$s\",\"key\":\"item-{}\",\"value\":{\"subject_id\":\"$s\"}}" \
    "$ADDR" memory.v1.Blackboard/Post >/dev/null 2>>"$WORK/memcall.err" || die "Post failed"
  seq 1 "$CACHED" | xargs -P 8 -I{} "$MEMCALL" -max-time 60 -H "$AUTH_A" \
    -d "{\"key\":\"$s-{}\",\"value\":\"dmFsdWU=\",\"ttl\":\"3600s\"}" \
    "$ADDR" memory.v1.Cache/Set >/dev/null 2>>"$WORK/memcall.err" || die "Set failed"
}

load_b() { # LABEL WARMUP
  "$LOADGEN" --target "$ADDR" --method /memory.v1.GlobalMemory/GetEntity \
    --request-file "$WORK/get-b" --header "$AUTH_B" --duration "$DURATION" --warmup "$2" \
    --concurrency "$CONCURRENCY" --expect-code 0 --label "$1" |
    tee -a "$WORK/privacy-loadgen-$stamp.out" | grep '^{' >>"$RESULTS"
}

# forget SUBJECT DRY LABEL: one Forget; appends memoryd's duration and the
# counts (its log line) to RESULTS under LABEL.
forget() {
  local rid="bench-$2-$1"
  "$MEMCALL" -max-time 60 -H "$AUTH_A" -H "x-request-id: $rid" \
    -d "{\"subjectId\":\"$1\",\"dryRun\":$2}" "$ADDR" memory.v1.Privacy/Forget \
    >"$WORK/forget.out" 2>"$WORK/memcall.err" || die "Forget failed: $(cat "$WORK/memcall.err")"
  local line
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    line=$(grep "\"request_id\":\"$rid\"" "$LOG" | grep '"forget ')
    [ -n "$line" ] && break
    sleep 0.1
  done
  [ -n "$line" ] || die "no log line for $rid"
  local ms counts
  ms=$(sed -n 's/.*"duration_ms":\([0-9]*\).*/\1/p' <<<"$line")
  counts=$(sed -n 's/.*"counts":"\([^"]*\)".*/\1/p' <<<"$line")
  echo "{\"label\":\"$3\",\"ms\":$ms}" >>"$RESULTS"
  printf '  %-8s %6s ms  %s\n' "$3" "$ms" "$counts"
}

total_records=$((ENTITIES + RELS + TASKS + ENTRIES + POINTS + ITEMS + CACHED))
echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds;" \
  "a subject with $total_records records; B: GetEntity, $CONCURRENCY in flight, ${DURATION}s a side"
for ((r = 1; r <= ROUNDS; r++)); do
  subject="subject-$r-$$"
  echo "bench: round $r/$ROUNDS: loading $total_records records" >&2
  seed "$subject" "$r"
  echo "round $r:"
  load_b before 1
  forget "$subject" true dry
  load_b during 0.5 &
  lpid=$!
  sleep 0.5
  forget "$subject" false forget
  wait "$lpid"
done

echo
row="%-34s %12s %10s %10s %8s\n"
# shellcheck disable=SC2059
printf "$row" "tenant B GetEntity" "median qps" "p50 us" "p99 us" errors
for l in before during; do
  # shellcheck disable=SC2059
  printf "$row" "$l" "$(median "$l" qps)" "$(median "$l" p50_us)" "$(median "$l" p99_us)" \
    "$(total "$l" errors)"
done
echo
f=$(median forget ms)
ratio_line "Forget of $total_records records:      $f ms median (goal < 1000 ms);" \
  "dry run $(median dry ms) ms"
ratio_line "Tenant B GetEntity p99 during/before: x$(ratio "$(median during p99_us)" \
  "$(median before p99_us)") ($(median before p99_us) -> $(median during p99_us) us)"
exit 0
