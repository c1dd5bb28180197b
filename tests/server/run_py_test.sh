#!/usr/bin/env bash
# Runs a Python unittest file with Debian's /usr/bin/python3 (python3-grpcio
# and python3-protobuf live there; the python3 first on PATH may be another
# interpreter without them).
#
#   run_py_test.sh SCRIPT.py STUB_FILE [ARGS...]
#
# SCRIPT's directory (for memoryd_process.py) and STUB_FILE's directory (the
# generated reflection stubs) go on PYTHONPATH; ARGS are passed to SCRIPT.
# Paths are relative to the runfiles tree (the test's working directory).
# Exits with the script's status: non-zero when any test failed.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 SCRIPT.py STUB_FILE [ARGS...]" >&2
  exit 2
fi
script=$1 stub=$2
shift 2

PY=/usr/bin/python3
if [[ ! -x $PY ]]; then
  echo "run_py_test.sh: $PY not found (apt-get install python3-grpcio python3-protobuf)" >&2
  exit 1
fi
for f in "$script" "$stub"; do
  [[ -f $f ]] || { echo "run_py_test.sh: $f not found (cwd $PWD)" >&2; exit 1; }
done

script_dir=$(cd "$(dirname "$script")" && pwd)
stub_dir=$(cd "$(dirname "$stub")" && pwd)
export PYTHONPATH="$stub_dir:$script_dir"
# Runfiles are not ours to write __pycache__ into; unbuffered keeps test.log
# lines in order with the server log we print.
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Ignore user site-packages and PYTHON* settings of the calling shell
# (PYTHONPATH above is ours): -s; -E would drop PYTHONPATH too.
exec "$PY" -s "$script_dir/$(basename "$script")" "$@"
