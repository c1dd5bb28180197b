#!/usr/bin/env bash
# bench/summary.sh FILE: the one table `make bench` ends with: every ratio
# line the drivers appended to FILE (bench/lib.sh's ratio_line), by driver,
# in the order they ran. Exit 0 always (benchmarks never fail the build).
set -u
file=${1:?usage: bench/summary.sh FILE}
echo
echo "==== make bench: every ratio of this run (medians of alternating rounds) ===="
if [ ! -s "$file" ]; then
  echo "(no driver reported a ratio)"
  exit 0
fi
awk -F'\t' '{ printf "%-10s %s\n", $1, $2 }' "$file"
exit 0
