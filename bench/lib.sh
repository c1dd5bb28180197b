# bench/lib.sh: shell functions the benchmark drivers (run.sh, global.sh,
# cache.sh, episodic.sh) share. Sourced, not run. Uses the caller's START_TIMEOUT (seconds a server
# may take to listen) and RESULTS (the JSON-lines results file).

die() {
  echo "bench: $*" >&2
  exit 1
}

# Connects with bash's /dev/tcp: no nc/curl dependency.
can_connect() {
  (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

# stop_server NAME PID: SIGTERM, 10 s to exit cleanly, then SIGKILL.
stop_server() {
  local name=$1 pid=$2 i rc
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bench: $name did not exit 10 s after SIGTERM, killing it" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  rc=$?
  # memoryd's shutdown path is worth watching too.
  [ "$rc" = 0 ] || echo "bench: $name exited with status $rc after SIGTERM" >&2
}

log_tail() {
  echo "---- last lines of $(basename "$1") ----" >&2
  tail -n 30 "$1" >&2
  echo "----" >&2
}

# wait_listening NAME PID ADDR LOG: until ADDR accepts or the server dies.
wait_listening() {
  local name=$1 pid=$2 addr=$3 log=$4 tries=0
  while ! can_connect "$addr"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: $name exited before listening on $addr" >&2
      log_tail "$log"
      exit 1
    fi
    # Counting 0.1 s naps: $SECONDS has whole-second granularity.
    if ((++tries > START_TIMEOUT * 10)); then
      echo "bench: $name not listening on $addr after ${START_TIMEOUT}s" >&2
      log_tail "$log"
      exit 1
    fi
    sleep 0.1
  done
}

# field LABEL KEY: that numeric field of every result line of LABEL, one a line.
field() {
  grep "\"label\":\"$1\"" "$RESULTS" 2>/dev/null |
    sed -n "s/.*\"$2\":\\([-0-9.eE+]*\\).*/\\1/p"
}
median() { field "$1" "$2" | awk -f bench/median.awk; }
total() { field "$1" "$2" | awk '{ s += $1 } END { printf "%d\n", s }'; }
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a == "nan" || b == "nan" || b + 0 == 0) print "nan"; else printf "%.2f\n", a / b }'
}

# ratio_line TEXT...: prints a ratio line and, when BENCH_SUMMARY names a
# file (`make bench` sets it), appends it there under this driver's name for
# the one summary table `make bench` ends with (bench/summary.sh).
ratio_line() {
  echo "$*"
  [ -z "${BENCH_SUMMARY:-}" ] ||
    printf '%s\t%s\n' "$(basename "$0" .sh)" "$*" >>"$BENCH_SUMMARY"
}

# alternate_rounds A B: ROUNDS rounds of `side A; side B` in odd rounds and
# `side B; side A` in even ones (ABBA), so a drift of the machine favours
# neither side. The caller defines side().
alternate_rounds() {
  local r
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "bench: round $r/$ROUNDS" >&2
    if ((r % 2)); then side "$1"; side "$2"; else side "$2"; side "$1"; fi
  done
}

# median_table TITLE COLUMN LABEL...: a title line, then one row per label
# under COLUMN: median qps, p50 and p99 of its rounds, and its errors.
median_table() {
  local title=$1 column=$2 l row="%-26s %12s %10s %10s %8s\n"
  shift 2
  echo
  echo "$title"
  # shellcheck disable=SC2059
  printf "$row" "$column" "median qps" "p50 us" "p99 us" errors
  for l in "$@"; do
    # shellcheck disable=SC2059
    printf "$row" "$l" "$(median "$l" qps)" "$(median "$l" p50_us)" "$(median "$l" p99_us)" \
      "$(total "$l" errors)"
  done
  echo
}
