#!/usr/bin/env bash
# Formats the C and C++ sources git knows with Debian's clang-format (the
# style files: .clang-format at the root, service/.clang-format for the
# service). `scripts/format.sh` rewrites them in place; `--check` changes
# nothing and fails naming the files that are not formatted (CI runs that).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null || scripts/install-deps.sh
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) not formatted (run scripts/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
