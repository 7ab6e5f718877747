#!/usr/bin/env bash
# The sanitizer legs (docs/testing.md, "Sanitizers"):
#   asan     the unit and e2e labels in the fuzz leg's clang tree (scripts/fuzz.sh: ASan and UBSan
#            on the whole tree, every report fatal), so the libraries are compiled once for both;
#   asan-ci  the same tree and options, only the tests in ASAN_CI_TESTS below: the decoders of
#            untrusted input, the ledger and state, and the e2e scenarios over HTTP;
#   tsan     the tests that run threads against one another (TSAN_TESTS below) in a gcc tree built
#            with ThreadSanitizer, only those targets.
# scripts/test.sh (so CI) runs asan-ci and tsan after the fuzz leg; the whole asan leg, every test
# target compiled a second time, is a command of its own (docs/testing.md says why). One leg
# name runs that leg, no argument all three; arguments after the leg go to ctest, e.g.
# `scripts/sanitize.sh tsan -R cluster_state`.
set -euo pipefail
cd "$(dirname "$0")/.."
go_bin=${GPUPACK_GO:-/usr/local/go/bin/go}
export PATH="$(dirname "$go_bin"):$PATH"  # configuring asks scripts/build-control-plane.sh for its dir
legs=(asan asan-ci tsan)
if [ $# -gt 0 ]; then
  legs=("$1")
  shift
fi

# Threads against threads: the extender's state under concurrent filters and binds, its parts and
# maintainer, the HTTP server, the kube client, informer and bind backend, the agent's run loop.
TSAN_TESTS=(cluster_state_test extender_state_parts_test extender_filter_hold_test extender_maintainer_test
  http_server_test extender_http_server_test kube_client_test kube_informer_test kube_backend_test
  run_loop_test stop_signals_test)

# Where untrusted bytes are decoded, where the ledger is kept, and the whole path over HTTP.
ASAN_CI_TESTS=(pod_request_test allocation_test gpunode_test pod_annotations_test extender_args_decoder_test
  extender_config_test kube_config_test kube_watch_stream_test webhook_mutator_test webhook_trust_test
  allocation_ledger_test cluster_state_test placement_test extender_test e2e_scenarios_test)

asan_leg() {
  local dir=${GPUPACK_FUZZ_BUILD_DIR:-build-fuzz}
  # Configures the tree as the fuzz leg does (same flags, so neither leg makes CMake rebuild).
  CC=clang CXX=clang++ cmake -S . -B "$dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPACK_WERROR=ON -DGPUPACK_FUZZ=ON -DGPUPACK_BUILD_BENCH=OFF \
    -DGPUPACK_FUZZ_SECONDS="${GPUPACK_FUZZ_SECONDS:-20}" -DGPUPACK_GO="$go_bin" >/dev/null
  if [ "$1" = all ]; then
    shift
    cmake --build "$dir" -j"$(nproc)"
    set -- -L 'unit|e2e' "$@"
  else
    shift
    cmake --build "$dir" -j"$(nproc)" --target "${ASAN_CI_TESTS[@]}"
    set -- -R "^($(IFS='|'; echo "${ASAN_CI_TESTS[*]}"))$" "$@"
  fi
  # detect_leaks: a leak is a report too. The fuzz tree's coverage hooks cost the tests little.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$dir" --output-on-failure --timeout 900 -j"$(nproc)" "$@"
}

tsan_leg() {
  local dir=${GPUPACK_TSAN_BUILD_DIR:-build-tsan}
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPACK_WERROR=ON -DGPUPACK_SANITIZE=thread \
    -DGPUPACK_BUILD_BENCH=OFF -DGPUPACK_GO="$go_bin" >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target "${TSAN_TESTS[@]}"
  local pattern
  pattern="^($(IFS='|'; echo "${TSAN_TESTS[*]}"))$"
  # halt_on_error: the first race fails its test with the two stacks, not a summary at exit.
  # detect_deadlocks=0: TSan's lock-order detector holds at most 64 locks per thread and aborts
  # beyond (a CHECK, not a report), and ClusterState::SetPolicy takes every node's lock at once.
  TSAN_OPTIONS=halt_on_error=1:detect_deadlocks=0 \
    ctest --test-dir "$dir" -R "$pattern" --output-on-failure --timeout 900 -j"$(nproc)" "$@"
}

for leg in "${legs[@]}"; do
  case $leg in
    asan) asan_leg all "$@" ;;
    asan-ci) asan_leg subset "$@" ;;
    tsan) tsan_leg "$@" ;;
    *) echo "sanitize.sh: unknown leg '$leg' (asan, asan-ci or tsan)" >&2; exit 2 ;;
  esac
done
