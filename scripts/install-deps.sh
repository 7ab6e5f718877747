#!/usr/bin/env bash
# Installs every Debian package gpupack needs to build, test and benchmark, skipping what is
# already there. Safe to run repeatedly; needs root (or sudo) on Debian 12 (bookworm).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev libsimdjson-dev
  nlohmann-json3-dev libyaml-cpp-dev prometheus-cpp-dev
  libboost-dev libboost-system-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  golang-go golang-github-masterminds-sprig-dev
  python3 python3-yaml openssl curl
)

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
