#!/usr/bin/env bash
# Installs the Debian packages memoryd needs to build, run and test -- only the
# ones that are missing. With everything present it prints one line and exits
# quickly (a single dpkg-query, no apt-get).
#
# Add new packages to PACKAGES below (keep the list in this one place).
set -euo pipefail

# golang-github-golang-protobuf-1-5-dev: Debian's Go gRPC accepts the 1.3 or
# the 1.5 series of github.com/golang/protobuf; stubs from protoc-gen-go 1.28
# need 1.5 (with 1.3 every call panics decoding the response).
PACKAGES=(
  bazel-bootstrap
  clang
  clang-format
  grpc-proto
  libclang-rt-14-dev
  libcurl4-openssl-dev
  golang-github-golang-protobuf-1-5-dev
  golang-go
  golang-google-grpc-dev
  golang-google-protobuf-dev
  libgrpc++-dev
  libgrpc-dev
  libgtest-dev
  libhiredis-dev
  libfaiss-dev
  libjansson-dev
  libmicrohttpd-dev
  libpq-dev
  libprotobuf-c-dev
  libprotobuf-dev
  libssl-dev
  libstemmer-dev
  libuv1-dev
  libzstd-dev
  nginx
  nghttp2-client
  openssl
  postgresql
  prometheus
  protobuf-c-compiler
  protobuf-compiler
  protobuf-compiler-grpc
  protoc-gen-go
  protoc-gen-go-grpc
  python3-grpcio
  python3-jsonschema
  python3-protobuf
  python3-yaml
  redis-server
)

# One dpkg-query for all packages. Unknown packages make it exit non-zero and
# print nothing for them; they simply count as missing.
declare -A installed=()
while IFS=$'\t' read -r pkg status; do
  # Status is "want flag state": "install ok installed", "hold ok installed", ...
  [[ $status == *" ok installed" ]] && installed[$pkg]=1
done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)

missing=()
for pkg in "${PACKAGES[@]}"; do
  [[ -n ${installed[$pkg]:-} ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"

sudo=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: not root and no sudo; install these as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y "${missing[@]}" </dev/null

echo "install-deps: installed ${missing[*]}"
