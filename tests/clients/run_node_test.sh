#!/usr/bin/env bash
# Runs node's own test runner on a Node.js package's test files against a
# real memoryd (tests/clients/memoryd_fixture).
#
#   run_node_test.sh FIXTURE PACKAGE_DIR/package.json TEST_FILE...
#
# Paths are relative to the runfiles tree (the test's working directory).
# Node resolves require() from a file's real path, so the package's
# node_modules/ is the one `make deps` installed in the source tree (npm ci);
# without it this says so and fails.
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 FIXTURE PACKAGE_JSON TEST_FILE..." >&2
  exit 2
fi
fixture=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
pkg=$(dirname "$(readlink -f "$2")")
shift 2

command -v node >/dev/null || { echo "run_node_test.sh: node not found (make deps)" >&2; exit 1; }
if [[ ! -d $pkg/node_modules ]]; then
  echo "run_node_test.sh: $pkg/node_modules is missing: run make deps (npm ci)" >&2
  exit 1
fi
files=()
for f in "$@"; do files+=("$(readlink -f "$f")"); done
export MEMORYD_FIXTURE=$fixture
cd "$pkg"
exec node --test --test-reporter=spec "${files[@]}"
