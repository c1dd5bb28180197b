#!/usr/bin/env bash
# Runs a Python script with Debian's /usr/bin/python3, which has
# python3-jsonschema (the python3 first on PATH may be another interpreter).
# Bazel 4's native py_test has no Python toolchain here, hence this wrapper.
#
#   run_py.sh SCRIPT.py [ARGS...]
set -euo pipefail
# Runfiles are read-only: no __pycache__. -s: ignore user site-packages.
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
exec /usr/bin/python3 -s "$@"
