#!/usr/bin/env bash
# Installs the npm dependencies of the Node.js packages (clients/node, then
# clients/mcp, which uses it) with `npm ci` from their committed
# package-lock.json, from the npm registry. A package whose node_modules was
# installed from the same lockfile is skipped (a stamp holds the lockfile's
# hash), so with everything present this prints one line and exits quickly.
# Needs node and npm (Node.js 18 or later): Debian's nodejs and npm packages
# are installed when neither is on PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(clients/node clients/mcp)

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-node-modules: node/npm not found; installing Debian's nodejs and npm"
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 \
    install -y nodejs npm </dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if ((major < 18)); then
  echo "install-node-modules: node $(node --version) is too old (18 or later: node --test)" >&2
  exit 1
fi

installed=()
for dir in "${PACKAGES[@]}"; do
  [[ -f $dir/package-lock.json ]] || continue
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  stamp=$dir/node_modules/.memoryd-lockfile-sha256
  [[ -f $stamp && $(cat "$stamp") == "$want" ]] && continue
  echo "install-node-modules: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
  installed+=("$dir")
done
if ((${#installed[@]} == 0)); then
  echo "install-node-modules: node_modules of ${PACKAGES[*]} up to date"
fi
