#!/usr/bin/env bash
# The fragmentation benchmark: every policy on the FGD paper's Alibaba trace families,
# with the paper's protocol (gpupack-sim defaults: inflation to 130 %, seeds 42-51).
#
#   scripts/fgd-benchmark.sh [--build DIR] [--seeds 42-51] [--out DIR] [--policies LIST] [TRACE...]
#
# TRACE is a pod-list name without prefix/suffix (default, gpushare40, multigpu20, gpuspec33, cpu250, ...),
# or "all" for every pod list in the trace folder (24). Default: the paper's 17 traces (Figs. 9, 11-14). The trace folder is $GPUPACK_TRACE_DIR, else
# data/traces/alibaba-gpu-v2023 in the repository, which ships only the default pod list (pass "default" there). Writes OUT/<trace>.txt (table) and
# OUT/<trace>.html (Fig. 9(a)-like chart), and prints a markdown summary of
# unallocated GPU % at arrived 100 % (median, mean ± SD) and seconds per seed.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$repo/build"
seeds="42-51"
out="$repo/fgd-benchmark"
policies="gpupack,random,dotprod,clustering,packing,bestfit,fgd"
traces=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --policies) policies="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fgd-benchmark: unknown option $1" >&2; exit 2 ;;
    *) traces+=("$1"); shift ;;
  esac
done
if [[ ${#traces[@]} -eq 0 ]]; then
  traces=(default gpushare40 gpushare60 gpushare80 gpushare100 multigpu20 multigpu30 multigpu40 multigpu50
          gpuspec10 gpuspec20 gpuspec25 gpuspec33 cpu050 cpu100 cpu200 cpu250)
fi
trace_dir="${GPUPACK_TRACE_DIR:-$repo/data/traces/alibaba-gpu-v2023}"
if [[ "${traces[*]}" == "all" ]]; then
  traces=()
  for f in "$trace_dir"/openb_pod_list_*.csv; do
    name="${f##*/openb_pod_list_}"
    traces+=("${name%.csv}")
  done
fi
sim="$build/cmd/sim/gpupack-sim"
[[ -x "$sim" ]] || { echo "fgd-benchmark: $sim not built (cmake --build $build --target gpupack-sim)" >&2; exit 2; }
[[ -f "$trace_dir/openb_node_list_gpu_node.csv" ]] || { echo "fgd-benchmark: no trace in $trace_dir (set GPUPACK_TRACE_DIR)" >&2; exit 2; }
mkdir -p "$out"

echo "| trace | policy | unallocated @100 median | mean ± SD | failed pods | s/seed |"
echo "|---|---|---:|---:|---:|---:|"
for t in "${traces[@]}"; do
  pods="$trace_dir/openb_pod_list_$t.csv"
  [[ -f "$pods" ]] || { echo "fgd-benchmark: no $pods (the repository ships only the default pod list; set GPUPACK_TRACE_DIR to the full trace)" >&2; exit 2; }
  args=(--cluster "$trace_dir/openb_node_list_gpu_node.csv" --workload "$pods" --policy "$policies" --seeds "$seeds")
  "$sim" "${args[@]}" --report "$out/$t.html" > "$out/$t.txt"
  # Table rows: policy, 80..130 (7 columns), mean±sd at 100, failed, s/seed.
  awk -v t="$t" 'NR > 2 && NF >= 11 && $1 != "report:" { printf "| %s | %s | %s | %s | %s | %s |\n", t, $1, $5, $9, $10, $11 }' "$out/$t.txt"
done
