#!/usr/bin/env bash
# Replays the Alibaba default trace through a real gpupack-extender over HTTP (gpupack-sim
# --extender) and in-process with the same policy (gpupack: FGD against the workload the
# extender learns), one fresh standalone extender per seed, and prints both results at arrived
# 100 % (the goal: within 0.2 percentage points of each other).
#
#   scripts/sim-extender-check.sh [--build DIR] [--extender-bin FILE] [--seeds "42 43"] [--trace NAME]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$repo/build"
extender_bin=""
seeds="42"
trace="default"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --extender-bin) extender_bin="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --trace) trace="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "sim-extender-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
sim="$build/cmd/sim/gpupack-sim"
extender_bin="${extender_bin:-$build/cmd/extender/gpupack-extender}"
trace_dir="${GPUPACK_TRACE_DIR:-$repo/data/traces/alibaba-gpu-v2023}"
nodes="$trace_dir/openb_node_list_gpu_node.csv"
pods="$trace_dir/openb_pod_list_$trace.csv"
for f in "$sim" "$extender_bin"; do [[ -x "$f" ]] || { echo "sim-extender-check: $f not built" >&2; exit 2; }; done

work="$(mktemp -d)"
ext_pid=""
cleanup() { [[ -n "$ext_pid" ]] && kill "$ext_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$sim" --cluster "$nodes" --write-cluster "$work/cluster.yaml"
# Default settings; nodes never go stale in a replay.
cat > "$work/config.yaml" <<YAML
heartbeatTTL: 0s
YAML

# The table's third line is the run; its fifth column is the median at arrived 100 %.
at100() { awk 'NR == 3 { print $5 }'; }

printf "%-6s %-22s %-22s %s\n" seed "http (extender)" "in-process (learned)" "s/seed http"
for seed in $seeds; do
  "$extender_bin" --standalone-cluster "$work/cluster.yaml" --config "$work/config.yaml" --listen 127.0.0.1:0 \
      > "$work/ext.out" 2> "$work/ext.err" &
  ext_pid=$!
  for _ in $(seq 100); do [[ -s "$work/ext.out" ]] && break; sleep 0.1; done
  addr="$(head -1 "$work/ext.out")"
  [[ -n "$addr" ]] || { echo "sim-extender-check: extender did not start:" >&2; cat "$work/ext.err" >&2; exit 1; }
  start=$(date +%s%N)
  http=$("$sim" --cluster "$nodes" --workload "$pods" --seeds "$seed" --extender "http://$addr" | at100)
  end=$(date +%s%N)
  kill "$ext_pid"; wait "$ext_pid" 2>/dev/null || true; ext_pid=""
  local_=$("$sim" --cluster "$nodes" --workload "$pods" --seeds "$seed" --policy gpupack | at100)
  printf "%-6s %-22s %-22s %d\n" "$seed" "$http" "$local_" "$(( (end - start) / 1000000000 ))"
done
