#!/usr/bin/env bash
# The fuzz leg (docs/testing.md, "Fuzzing"): a clang build, with ASan and UBSan, of only the
# libFuzzer targets in fuzz/, then each target run for GPUPACK_FUZZ_SECONDS (default 20) from its
# seed corpus plus what earlier runs in the same build dir found. A crash, leak, sanitizer report,
# hang (10 s on one input) or 2 GiB of memory fails it, and the input that caused it is left in
# $GPUPACK_FUZZ_BUILD_DIR/fuzz/findings/. scripts/test.sh runs it after the other tests; extra
# arguments go to ctest, e.g. `scripts/fuzz.sh -R extender_args`.
set -euo pipefail
cd "$(dirname "$0")/.."
go_bin=${GPUPACK_GO:-/usr/local/go/bin/go}
export PATH="$(dirname "$go_bin"):$PATH"  # configuring asks scripts/build-control-plane.sh for its dir
build_dir=${GPUPACK_FUZZ_BUILD_DIR:-build-fuzz}
# CC/CXX pick clang when the build dir is first configured (a -D compiler given again on a
# configured dir that spells it differently would make CMake discard its cache).
CC=clang CXX=clang++ cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPACK_WERROR=ON -DGPUPACK_FUZZ=ON -DGPUPACK_BUILD_BENCH=OFF \
  -DGPUPACK_FUZZ_SECONDS="${GPUPACK_FUZZ_SECONDS:-20}" -DGPUPACK_GO="$go_bin" >/dev/null
cmake --build "$build_dir" --target fuzz_all -j"$(nproc)"
# The seconds are wall time per target; -j runs one target per core (libFuzzer uses one thread).
ctest --test-dir "$build_dir" -L fuzz --output-on-failure -j"$(nproc)" "$@"
