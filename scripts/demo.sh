#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing, builds the extender and the
# simulator, starts `gpupack-extender --standalone-cluster examples/cluster.yaml` on a free
# loopback port, replays examples/workload.yaml through it exactly as kube-scheduler would
# (filter → prioritize → bind over HTTP), and prints the packing report. Also writes
# out/demo-report.html. Pass other files with CLUSTER=… WORKLOAD=….
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${GPUPACK_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target gpupack-extender gpupack-sim

cluster=${CLUSTER:-examples/cluster.yaml}
workload=${WORKLOAD:-examples/workload.yaml}
mkdir -p out
log=out/demo-extender.log
"$build_dir"/cmd/extender/gpupack-extender --standalone-cluster "$cluster" --listen 127.0.0.1:0 \
  >out/demo-extender.stdout 2>"$log" &
extender_pid=$!
trap 'kill "$extender_pid" 2>/dev/null || true' EXIT
# The extender prints its bound address on its first stdout line.
for _ in $(seq 1 100); do
  address=$(head -n 1 out/demo-extender.stdout 2>/dev/null || true)
  [ -n "$address" ] && break
  kill -0 "$extender_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$address" ] || { echo "demo: the extender did not report its address" >&2; exit 1; }
echo "demo: gpupack-extender (standalone, $cluster) listening on $address"
echo "demo: replaying $workload through it as kube-scheduler would"
"$build_dir"/cmd/sim/gpupack-sim --cluster "$cluster" --workload "$workload" \
  --extender "http://$address" --report out/demo-report.html
echo
echo "demo: the same workload in process, gpupack against the published baselines (10 seeds)"
"$build_dir"/cmd/sim/gpupack-sim --cluster "$cluster" --workload "$workload" \
  --policy gpupack,fgd,bestfit,packing,random --report out/demo-policies.html
echo "demo: HTML reports in out/demo-report.html and out/demo-policies.html; extender log in $log"
