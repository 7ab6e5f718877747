#!/usr/bin/env bash
# Installs what is missing, builds the real control plane once (scripts/build-control-plane.sh:
# etcd, kube-apiserver, kube-scheduler, helm into ~/.cache/gpupack; reused afterwards), builds
# everything with warnings as errors, and runs every CTest test (labels unit, e2e, cluster, chart,
# slow), then the fuzz leg (scripts/fuzz.sh: every fuzz target for 20 s under ASan and UBSan), the
# ASan+UBSan leg in the same clang tree (scripts/sanitize.sh asan-ci: the decoders', ledger's and
# e2e scenarios' tests) and the ThreadSanitizer leg (scripts/sanitize.sh tsan: the tests that run
# threads against each other). Extra arguments go to ctest and leave the legs out, e.g.
# `scripts/test.sh -L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Go >= 1.26 first on PATH: whatever runs `go` (the control-plane build, the cluster suite's
# `go test -c`) must never find Debian's older /usr/bin/go.
go_bin=${GPUPACK_GO:-/usr/local/go/bin/go}
export PATH="$(dirname "$go_bin"):$PATH"
controlplane_bin=$(scripts/build-control-plane.sh)
build_dir=${GPUPACK_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPACK_WERROR=ON \
  -DGPUPACK_GO="$go_bin" -DGPUPACK_CONTROLPLANE_BIN="$controlplane_bin" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j"$(nproc)" "$@"
if [ $# -eq 0 ]; then
  scripts/fuzz.sh
  scripts/sanitize.sh asan-ci
  scripts/sanitize.sh tsan
fi
