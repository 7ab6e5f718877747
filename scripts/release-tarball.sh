#!/usr/bin/env bash
# Builds the four gpupack binaries in Release mode and packs them, with the docs, the examples and
# the shipped trace, into out/gpupack-<version>-linux-<arch>.tar.gz (docs/install.md, "Binaries
# from a release tarball"). The binaries link Debian 12's shared libraries; the target machine
# needs the runtime packages that file lists.
#
# --gpu-check: instead, the hardware check's bundle, out/gpupack-gpu-check-<version>-linux-<arch>.tar.gz
# (docs/hardware.md): the agent with the shared libraries it links, gpu-check.sh and its CUDA
# source, for a GPU machine that has no package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${GPUPACK_BUILD_DIR:-build-release}
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DGPUPACK_BUILD_BENCH=OFF -DGPUPACK_REVISION="$revision" >/dev/null
version=$(sed -n 's/^project(gpupack VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
if [[ "${1:-}" == --gpu-check ]]; then
  cmake --build "$build_dir" -j"$(nproc)" --target gpupack-agent
  name="gpupack-gpu-check-$version-linux-$(uname -m)"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  scripts/gpu-check/bundle.sh "$stage/$name" "$build_dir/cmd/agent/gpupack-agent"
  echo "$revision" >"$stage/$name/REVISION"
  mkdir -p out
  tar -C "$stage" -czf "out/$name.tar.gz" "$name"
  echo "out/$name.tar.gz"
  exit 0
fi
cmake --build "$build_dir" -j"$(nproc)" --target gpupack-extender gpupack-agent gpupack-webhook gpupack-sim
name="gpupack-$version-linux-$(uname -m)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin"
for b in extender/gpupack-extender agent/gpupack-agent webhook/gpupack-webhook sim/gpupack-sim; do
  install -m 0755 "$build_dir/cmd/$b" "$stage/$name/bin/"
done
cp -r README.md docs examples "$stage/$name/"
mkdir -p "$stage/$name/data" && cp -r data/traces "$stage/$name/data/"
echo "$revision" >"$stage/$name/REVISION"
mkdir -p out
tar -C "$stage" -czf "out/$name.tar.gz" "$name"
echo "out/$name.tar.gz"
