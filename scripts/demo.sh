#!/usr/bin/env bash
# What gpupack does, on real data, in about a minute: installs what is missing, builds the
# extender and the simulator, starts `gpupack-extender --standalone-cluster` on the Alibaba GPU
# cluster the repository ships (data/traces/alibaba-gpu-v2023: 1213 nodes, 6212 GPUs), replays the
# trace's default pod list through it over HTTP exactly as kube-scheduler would (filter →
# prioritize → bind per pod), replays the same pods in process with the published baselines (fgd,
# bestfit, random), and prints one table. Writes out/demo-report.html (the curves) and keeps the
# extender's log, one line per decision, in out/demo-extender.log.
#
#   scripts/demo.sh                     the shipped trace, seed 42
#   SEED=43 scripts/demo.sh             another shuffle of the same pods
#   TRACE_DIR=/path/to/full/trace POD_LIST=gpushare40 scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

say() { printf 'demo: %s\n' "$*"; }

scripts/install-deps.sh
build_dir=${GPUPACK_BUILD_DIR:-build}
say "building gpupack-extender and gpupack-sim in $build_dir (first time: a few minutes)"
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target gpupack-extender gpupack-sim >/dev/null
extender_bin="$build_dir/cmd/extender/gpupack-extender"
sim_bin="$build_dir/cmd/sim/gpupack-sim"

trace_dir=${TRACE_DIR:-$repo/data/traces/alibaba-gpu-v2023}
pod_list=${POD_LIST:-default}
seed=${SEED:-42}
nodes_csv="$trace_dir/openb_node_list_gpu_node.csv"
pods_csv="$trace_dir/openb_pod_list_$pod_list.csv"
for f in "$nodes_csv" "$pods_csv"; do
  [ -f "$f" ] || { echo "demo: no $f (the repository ships the default pod list; TRACE_DIR names a full trace)" >&2; exit 2; }
done

mkdir -p out
# The extender reads cluster files; the simulator writes the trace's node list as one.
"$sim_bin" --cluster "$nodes_csv" --write-cluster out/demo-cluster.yaml
# The decision's defaults need nothing for the trace's 1000 MiB GPUs; a replay has no agents, so
# nodes never go stale.
cat >out/demo-extender.yaml <<'YAML'
heartbeatTTL: 0s
YAML

log=out/demo-extender.log
"$extender_bin" --standalone-cluster out/demo-cluster.yaml --config out/demo-extender.yaml \
  --listen 127.0.0.1:0 >out/demo-extender.stdout 2>"$log" &
extender_pid=$!
progress_pid=""
cleanup() {
  [ -n "$progress_pid" ] && kill "$progress_pid" 2>/dev/null
  kill "$extender_pid" 2>/dev/null || true
}
trap cleanup EXIT
# The extender prints its bound address as its first stdout line.
address=""
for _ in $(seq 1 100); do
  address=$(head -n 1 out/demo-extender.stdout 2>/dev/null || true)
  [ -n "$address" ] && break
  kill -0 "$extender_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$address" ] || { echo "demo: the extender did not report its address; its log:" >&2; cat "$log" >&2; exit 1; }

pods=$(($(wc -l <"$pods_csv") - 1))
say "gpupack-extender (standalone) serving the trace's 1213-node cluster on http://$address"
say "replaying $pod_list ($pods pods, inflated to 130 % of GPU capacity, seed $seed):"
say "  1. through the extender over HTTP, filter → prioritize → bind per pod, as kube-scheduler would"
say "  2. in process with the baselines fgd (the FGD paper), bestfit and random, same pods, same order"

# A progress line while the replay runs: the extender logs one line per decision.
start=$(date +%s)
(
  while sleep 1; do
    decisions=$(grep -c ' decision pod=' "$log" 2>/dev/null || true)
    printf '\rdemo: %3ds  extender decisions so far: %-6s' "$(($(date +%s) - start))" "${decisions:-0}" >&2
  done
) &
progress_pid=$!

"$sim_bin" --cluster "$nodes_csv" --workload "$pods_csv" --seeds "$seed" \
  --extender "http://$address" --policy fgd,bestfit,random --report out/demo-report.html >out/demo-table.txt
kill "$progress_pid" 2>/dev/null || true
wait "$progress_pid" 2>/dev/null || true
progress_pid=""
printf '\r%-70s\r' '' >&2
bound=$(grep -c ' decision pod=.* reason="bound' "$log" || true)
say "done in $(($(date +%s) - start)) s; the extender bound $bound pods"
echo
cat out/demo-table.txt
cat <<'EOF'

  extender  gpupack itself: the standalone gpupack-extender, driven over HTTP
  fgd       Fragmentation Gradient Descent (Weng et al., USENIX ATC '23), in process
  bestfit   the node with the least GPU left after placing the pod, in process
  random    a random node that fits, in process
Columns 80..130: GPU capacity left unallocated (%, lower is better) when the pods that have
arrived ask for that share of the cluster's GPUs; past 100 % not everything can fit, and what
is still unallocated then is lost to fragments. "failed": pods that fit on no node.
"s/seed": seconds per replay. docs/simulator.md explains the protocol.
EOF
echo
say "report with the curves: out/demo-report.html; every decision: $log"
