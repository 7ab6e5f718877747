#!/usr/bin/env bash
# Installs every Debian package gpupack needs to build, test and benchmark, skipping what is
# already there. Safe to run repeatedly; needs root (or sudo) on Debian 12 (bookworm).
# Go is not a Debian package here: the control plane (scripts/build-control-plane.sh) and the
# cluster suite need Go >= 1.26 at /usr/local/go/bin/go (or $GPUPACK_GO); Debian's golang-go is
# too old and is never installed nor used.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev libsimdjson-dev
  nlohmann-json3-dev libyaml-cpp-dev prometheus-cpp-dev
  libboost-dev libboost-system-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-yaml openssl curl clang-format
  clang libclang-rt-14-dev
)

go_bin=${GPUPACK_GO:-/usr/local/go/bin/go}
go_minor=$("$go_bin" env GOVERSION 2>/dev/null | sed -nE 's/^go1\.([0-9]+).*/\1/p')
if [ -z "$go_minor" ] || [ "$go_minor" -lt 26 ]; then
  echo "install-deps: Go >= 1.26 is required at $go_bin (found: $("$go_bin" env GOVERSION 2>/dev/null || echo none));" \
       "install it from https://go.dev/dl or set GPUPACK_GO" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
