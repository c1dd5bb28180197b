#!/usr/bin/env bash
# Builds the Go client offline from Debian's packages (golang-go,
# golang-google-grpc-dev, golang-google-protobuf-dev, protoc-gen-go,
# protoc-gen-go-grpc): a GOPATH holding the generated memory.v1 stubs and
# this directory's packages (import path memoryd/clients/go/...), next to
# /usr/share/gocode. No module proxy, nothing fetched.
#
#   clients/go/build.sh --gopath DIR            # assemble the GOPATH only
#   clients/go/build.sh --test OUT --example OUT [--gopath DIR]
#
# --test: the package's tests compiled (go test -c); --example: the example
# agent. To build your own agent against it:
#   GO111MODULE=off GOPATH=DIR:/usr/share/gocode go build ...
# The build cache is $GOCACHE, else ~/.cache/memoryd-go-build (or under /tmp).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

gopath= test_out= example_out=
while (($#)); do
  case $1 in
    --gopath) gopath=$(realpath -m "$2"); shift 2 ;;
    --test) test_out=$(realpath -m "$2"); shift 2 ;;
    --example) example_out=$(realpath -m "$2"); shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tmp=
if [[ -z $gopath ]]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/memoryd-gopath.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  gopath=$tmp
fi
for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v $tool >/dev/null || { echo "build.sh: $tool not found (make deps)" >&2; exit 1; }
done

pkg=$gopath/src/memoryd/clients/go
rm -rf "$pkg"
mkdir -p "$pkg"
cp -r "$here/memoryd" "$here/example" "$pkg/"
(cd "$root/protos" && protoc -I. -I/usr/include --go_out="$gopath/src" --go-grpc_out="$gopath/src" \
  memory/v1/*.proto)

export GO111MODULE=off GOPATH=$gopath:/usr/share/gocode GOPROXY=off GOFLAGS= GOENV=off
export GOCACHE=${GOCACHE:-${HOME:+$HOME/.cache/memoryd-go-build}}
export GOCACHE=${GOCACHE:-/tmp/memoryd-go-build}
cd "$pkg"
if [[ -n $test_out ]]; then
  go vet ./memoryd ./example
  go test -c -o "$test_out" ./memoryd
fi
if [[ -n $example_out ]]; then
  go build -o "$example_out" ./example
fi
