#!/usr/bin/env bash
# Runs the Go client's compiled tests (clients/go: go test -c) against a real
# memoryd (tests/clients/memoryd_fixture), with the example agent's binary.
#
#   run_go_test.sh FIXTURE TEST_BINARY EXAMPLE_BINARY
#
# Paths are relative to the runfiles tree (the test's working directory).
set -euo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
export MEMORYD_FIXTURE=$(abs "$1") MEMORYD_GO_EXAMPLE=$(abs "$3")
exec "$(abs "$2")" -test.v -test.timeout=240s
