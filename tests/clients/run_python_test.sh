#!/usr/bin/env bash
# Runs a Python unittest file with Debian's /usr/bin/python3 (python3-grpcio
# and python3-protobuf live there; the python3 first on PATH may be another
# interpreter without them).
#
#   run_python_test.sh SCRIPT.py PATH_FILE... -- [ARGS...]
#
# The directory of each PATH_FILE goes on PYTHONPATH, in order (a runfile
# standing for its directory: clients/python/memoryd_client.py for the
# client and its generated stubs, tests/server/memoryd_process.py, ...);
# ARGS are passed to SCRIPT. Paths are relative to the runfiles tree (the
# test's working directory). Exits with the script's status.
set -euo pipefail

if (($# < 1)); then
  echo "usage: $0 SCRIPT.py PATH_FILE... -- [ARGS...]" >&2
  exit 2
fi
script=$1
shift
path=
while (($# > 0)) && [[ $1 != -- ]]; do
  [[ -e $1 ]] || { echo "run_python_test.sh: $1 not found (cwd $PWD)" >&2; exit 1; }
  path+=${path:+:}$(cd "$(dirname "$1")" && pwd)
  shift
done
(($# > 0)) && shift # the --

PY=/usr/bin/python3
if [[ ! -x $PY ]]; then
  echo "run_python_test.sh: $PY not found (apt-get install python3-grpcio python3-protobuf)" >&2
  exit 1
fi
[[ -f $script ]] || { echo "run_python_test.sh: $script not found (cwd $PWD)" >&2; exit 1; }

export PYTHONPATH=$path
# Runfiles are not ours to write __pycache__ into; unbuffered keeps test.log
# lines in order with the server log.
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# -s: ignore user site-packages (PYTHONPATH above is ours, so not -E).
exec "$PY" -s "$script" "$@"
