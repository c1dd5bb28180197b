#!/usr/bin/env bash
# bazel run //clients/python:example -- [ADDRESS]
# Runs example.py on Debian's /usr/bin/python3 (python3-grpcio,
# python3-protobuf) with the client and its generated stubs on PYTHONPATH;
# both sit in this target's runfiles under clients/python.
set -euo pipefail
dir=
for d in "${RUNFILES_DIR:-}/memoryd/clients/python" "$0.runfiles/memoryd/clients/python" \
  "$PWD/clients/python"; do
  if [[ -f $d/example.py && -d $d/memory ]]; then
    dir=$d
    break
  fi
done
if [[ -z $dir ]]; then
  echo "run_example.sh: runfiles not found; use: bazel run //clients/python:example" >&2
  exit 2
fi
export PYTHONPATH=$dir${PYTHONPATH:+:$PYTHONPATH}
exec /usr/bin/python3 -s "$dir/example.py" "$@"
