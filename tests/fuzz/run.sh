#!/usr/bin/env bash
# Runs every fuzz target under libFuzzer (clang, ASan + UBSan) for a bounded
# time each; exits non-zero and names the crashing input if any target
# crashes. Not part of `make test` (time budget); see tests/fuzz/README.md.
#
# usage: tests/fuzz/run.sh [SECONDS] [TARGET...]
#   SECONDS  per target, default 20
#   TARGET   any of ALL below (default: all)
# env: FUZZ_WORK_DIR    where binaries, corpora, logs and crash files go
#                       (default: a new /tmp/memoryd-fuzz.XXXXXX, kept)
#      FUZZ_KEEP_GOING  1: libFuzzer's fork mode with -ignore_crashes, so a
#                       target keeps fuzzing past a crash (a known bug's seed,
#                       say) and every crashing input is kept; still exits 1
#      BAZEL            bazel binary (default: bazel)
#
# The targets are compiled with clang directly, not through Bazel: Bazel's
# C toolchain is auto-configured once from $CC for the whole (shared) output
# base, so switching it to clang would re-configure and rebuild everyone
# else's gcc build. Bazel is only asked for the generated protobuf-c sources
# and the generated seeds, with the default configuration and
# --symlink_prefix=/ so no bazel-* symlink moves.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SECS=${1:-20}
shift || true
ALL=(descpool_fuzz redis_url_fuzz config_fuzz log_fuzz request_decode_fuzz jwt_fuzz pii_fuzz
  nsglob_fuzz global_query_fuzz cache_codec_fuzz qdrant_json_fuzz bb_codec_fuzz receipt_fuzz
  traceparent_fuzz wm_fuzz sess_record_fuzz embed_json_fuzz lex_fuzz)
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")
BAZEL=${BAZEL:-bazel}
[[ $SECS =~ ^[0-9]+$ ]] || { echo "run.sh: SECONDS must be a number, got '$SECS'" >&2; exit 2; }

WORK=${FUZZ_WORK_DIR:-$(mktemp -d /tmp/memoryd-fuzz.XXXXXX)}
mkdir -p "$WORK/bin" "$WORK/obj" "$WORK/logs"
echo "run.sh: work directory $WORK"

# libFuzzer ships in libclang-rt-14-dev, which `clang` only recommends.
probe="$WORK/obj/probe"
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
  > "$probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" 2> "$probe.log"; then
  cat "$probe.log" >&2
  echo "run.sh: clang cannot link -fsanitize=fuzzer; install libclang-rt-14-dev" >&2
  exit 2
fi

SEED_TARGETS=(//protos:api_c //protos:descriptor_set //tests/fuzz:descpool_seeds
              //tests/fuzz:request_seeds //tests/fuzz:deep_nesting_seed)
echo "run.sh: bazel build ${SEED_TARGETS[*]}"
"$BAZEL" build --symlink_prefix=/ "${SEED_TARGETS[@]}" 2> "$WORK/logs/bazel.log" ||
  { cat "$WORK/logs/bazel.log" >&2; exit 2; }
BIN=$("$BAZEL" info --symlink_prefix=/ bazel-bin 2> /dev/null)

SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
BASE=(-std=gnu11 -D_GNU_SOURCE -g -O1 "${SAN[@]}" -I"$ROOT" -I"$BIN" -I"$BIN/protos"
  -isystem /usr/include/postgresql)
# Same warnings as MEMORYD_COPTS (bazel/system/defs.bzl) for our sources.
OURS=(-Wall -Wextra -Werror)

# Generated protobuf-c code, compiled once (not ours to hold to -Werror).
GEN_OBJS=()
while IFS= read -r src; do
  rel=${src#"$BIN/protos/"}
  obj="$WORK/obj/${rel//\//_}.o"
  [[ $obj -nt $src ]] || clang "${BASE[@]}" -fsanitize=fuzzer-no-link -w -c "$src" -o "$obj"
  GEN_OBJS+=("$obj")
done < <(find "$BIN/protos" -name '*.pb-c.c' | sort)

# A target's sources are the service/ .c files its cc_test depends on, as
# Bazel's graph says (tests/fuzz/BUILD is the one list; a list kept here
# drifted when files moved between modules). They are compiled once each
# into $WORK/obj and archived per target, so the linker takes only the
# objects the target reaches; every system library the project links
# (bazel/system/BUILD) is offered, and the unused ones cost nothing.
sources_of() {
  case " ${ALL[*]} " in
    *" $1 "*) ;;
    *) echo "run.sh: unknown target $1 (known: ${ALL[*]})" >&2; exit 2 ;;
  esac
  "$BAZEL" query \
    "filter('^//service/.*[.]c\$', kind('source file', deps(//tests/fuzz:$1)))" \
    2>> "$WORK/logs/bazel.log" | sed -e 's|^//||' -e 's|:|/|'
}
SYSLIBS=(-lgrpc -lgpr -lpq -lhiredis -lcurl -ljansson -lssl -lcrypto -lzstd -lprotobuf-c -lm
  -lstemmer -lpthread)
# Compiles each of the sources named on stdin once into $WORK/obj and
# archives them with the generated protobuf-c objects as $2; $1 names the
# target in errors.
archive_of() {
  local t=$1 lib=$2 src obj objs=()
  while IFS= read -r src; do
    [[ -n $src ]] || continue
    obj="$WORK/obj/${src//\//_}.o"
    [[ $obj -nt $src ]] ||
      clang "${BASE[@]}" "${OURS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    objs+=("$obj")
  done
  ((${#objs[@]})) || { echo "run.sh: bazel names no service/ source for $t" >&2; exit 2; }
  rm -f "$lib"
  ar rcs "$lib" "${objs[@]}" "${GEN_OBJS[@]}"
}
generated_seeds_of() {
  case $1 in
    descpool_fuzz) echo "$BIN/protos/memoryd.desc $BIN/tests/fuzz/gen_corpus/descpool_fuzz" ;;
    request_decode_fuzz) echo "$BIN/tests/fuzz/gen_corpus/request_decode_fuzz" ;;
  esac
}
# Lines longer than log.c's 4 KiB buffer must be tried too.
options_of() {
  case $1 in
    log_fuzz) echo "-max_len=12288" ;;
  esac
}

failed=()
summary=()
for t in "${TARGETS[@]}"; do
  echo "run.sh: building $t"
  archive_of "$t" "$WORK/obj/$t.a" < <(sources_of "$t")
  clang "${BASE[@]}" "${OURS[@]}" -fsanitize=fuzzer "tests/fuzz/$t.c" "$WORK/obj/$t.a" \
    "${SYSLIBS[@]}" -o "$WORK/bin/$t"

  corpus="$WORK/corpus/$t"
  artifacts="$WORK/artifacts/$t"
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp tests/fuzz/corpus/"$t"/* "$corpus"/
  for g in $(generated_seeds_of "$t"); do
    if [[ -d $g ]]; then cp "$g"/* "$corpus"/; else cp "$g" "$corpus"/; fi
  done
  chmod -R u+w "$corpus"
  opts=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  [[ -f tests/fuzz/$t.dict ]] && opts+=(-dict="tests/fuzz/$t.dict")
  [[ ${FUZZ_KEEP_GOING:-} == 1 ]] &&
    opts+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # shellcheck disable=SC2207
  opts+=($(options_of "$t"))

  log="$WORK/logs/$t.log"
  echo "run.sh: fuzzing $t for ${SECS}s (log: $log)"
  rc=0
  # An 8 MiB stack, as memoryd's worker threads get, so deep recursion
  # fails here exactly when it would fail in the server.
  (ulimit -s 8192 2> /dev/null || true
   ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:handle_abort=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   exec "$WORK/bin/$t" "${opts[@]}" "$corpus") > "$log" 2>&1 || rc=$?

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [[ ${FUZZ_KEEP_GOING:-} == 1 ]]; then
    # Fork mode prints no final stats; its last status line has the total
    # executions and time (its exec/s is the last job's only).
    status=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1 || true)
    execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<< "$status")
    took=$(sed -n 's/.* time: \([0-9]*\)s.*/\1/p' <<< "$status")
    rate=$(( ${took:-0} > 0 ? ${execs:-0} / took : 0 ))
    n_crashes=$(find "$artifacts" -type f | wc -l)
    ((n_crashes == 0)) || rc=1
  fi
  if ((rc != 0)); then
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    [[ ${FUZZ_KEEP_GOING:-} == 1 ]] && crash="$n_crashes file(s) in $artifacts"
    echo "run.sh: $t FAILED (exit $rc); crashing input: ${crash:-see $log}" >&2
    # The report: from the sanitizer's/invariant's first line to libFuzzer's.
    first=$(grep -m1 -n -E '^==[0-9]+== ?ERROR|fuzz invariant failed|runtime error:' "$log" |
      cut -d: -f1 || true)
    if [[ -n $first ]]; then sed -n "${first},\$p" "$log" | head -25 >&2; else tail -25 "$log" >&2; fi
    failed+=("$t")
    summary+=("$(printf '%-22s FAILED  execs=%-10s exec/s=%-8s crash=%s' "$t" "${execs:-?}" "${rate:-?}" "${crash:-?}")")
  else
    summary+=("$(printf '%-22s ok      execs=%-10s exec/s=%-8s corpus=%s' "$t" "${execs:-?}" "${rate:-?}" "$(ls "$corpus" | wc -l)")")
  fi
done

echo
echo "run.sh: summary (${SECS}s per target; work directory $WORK)"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "run.sh: ${#failed[@]} target(s) crashed: ${failed[*]}" >&2
  exit 1
fi
