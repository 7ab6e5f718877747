#!/usr/bin/env bash
# The fragmentation benchmark: every policy on the FGD paper's Alibaba trace families,
# with the paper's protocol (gpupack-sim defaults: inflation to 130 %, seeds 42-51).
#
#   scripts/fgd-benchmark.sh [--build DIR] [--seeds 42-51] [--out DIR] [--policies LIST] [--fill-pods LIST [--burst]] [TRACE...]
#
# TRACE is a pod-list name without prefix/suffix (default, gpushare40, multigpu20, gpuspec33, cpu250, ...),
# or "all" for every pod list in the trace folder (24). Default: the paper's 17 traces (Figs. 9, 11-14). The trace folder is $GPUPACK_TRACE_DIR, else
# data/traces/alibaba-gpu-v2023 in the repository, which ships only the default pod list (pass "default" there). Writes OUT/<trace>.txt (table) and
# OUT/<trace>.html (Fig. 9(a)-like chart), and prints a markdown summary of
# unallocated GPU % at arrived 100 % (median, mean ± SD) and seconds per seed.
# --fill-pods 50,100,200 measures the early window instead (gpupack-sim --fill-pods, one run per
# window; OUT/<trace>-first<N>.txt) and ends with the cells where the first policy's median is
# above fgd's. Seeds: medians of clusters of 5-25 nodes spread widely, so use 42-1041 there.
# --burst: each window's pods all wait from the start (gpupack-sim --burst), not one after another.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$repo/build"
seeds="42-51"
out="$repo/fgd-benchmark"
policies="gpupack,random,dotprod,clustering,packing,bestfit,fgd"
windows=""
burst=()
traces=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --policies) policies="$2"; shift 2 ;;
    --fill-pods) windows="$2"; shift 2 ;;
    --burst) burst=(--burst); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fgd-benchmark: unknown option $1" >&2; exit 2 ;;
    *) traces+=("$1"); shift ;;
  esac
done
if [[ ${#traces[@]} -eq 0 ]]; then
  traces=(default gpushare40 gpushare60 gpushare80 gpushare100 multigpu20 multigpu30 multigpu40 multigpu50
          gpuspec10 gpuspec20 gpuspec25 gpuspec33 cpu050 cpu100 cpu200 cpu250)
fi
[[ ${#burst[@]} -eq 0 || -n "$windows" ]] || { echo "fgd-benchmark: --burst needs --fill-pods (the burst is each window's pods)" >&2; exit 2; }
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

if [[ -z "$windows" ]]; then
  echo "| trace | policy | unallocated @100 median | mean ± SD | failed pods | s/seed |"
  echo "|---|---|---:|---:|---:|---:|"
else
  [[ "$windows" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "fgd-benchmark: --fill-pods wants pod counts such as 50,100,200, not \"$windows\"" >&2; exit 2; }
  echo "| trace | first pods | policy | unallocated @100 median | mean ± SD | failed pods | s/seed |"
  echo "|---|---:|---|---:|---:|---:|---:|"
fi
# The markdown rows of gpupack-sim's table in $1, each led by the cells $2 ("trace" or "trace | N"):
# policy, then of its columns (80..130, mean±sd at 100, failed, s/seed) the median at 100, mean±sd,
# failed and s/seed.
rows() {
  awk -v lead="$2" 'NR > 2 && NF >= 11 && $1 != "report:" { printf "| %s | %s | %s | %s | %s | %s |\n", lead, $1, $5, $9, $10, $11 }' "$1"
}
first_policy="${policies%%,*}"
above=()
cells=0
for t in "${traces[@]}"; do
  pods="$trace_dir/openb_pod_list_$t.csv"
  [[ -f "$pods" ]] || { echo "fgd-benchmark: no $pods (the repository ships only the default pod list; set GPUPACK_TRACE_DIR to the full trace)" >&2; exit 2; }
  args=(--cluster "$trace_dir/openb_node_list_gpu_node.csv" --workload "$pods" --policy "$policies" --seeds "$seeds")
  if [[ -z "$windows" ]]; then
    "$sim" "${args[@]}" --report "$out/$t.html" > "$out/$t.txt"
    rows "$out/$t.txt" "$t"
    continue
  fi
  for n in ${windows//,/ }; do
    "$sim" "${args[@]}" --fill-pods "$n" ${burst[@]+"${burst[@]}"} > "$out/$t-first$n.txt"
    rows "$out/$t-first$n.txt" "$t | $n"
    # The first policy against fgd at arrived 100 %, when both ran.
    verdict="$(awk -v a="$first_policy" 'NR > 2 && NF >= 11 { m[$1] = $5 }
      END { if ((a in m) && ("fgd" in m) && a != "fgd") print (m[a] > m["fgd"] ? "above " m[a] " against " m["fgd"] : "ok") }' \
      "$out/$t-first$n.txt")"
    [[ -n "$verdict" ]] && cells=$((cells + 1))
    [[ "$verdict" == above* ]] && above+=("$t first $n (${verdict#above })")
  done
done
if [[ -n "$windows" && $cells -gt 0 ]]; then
  echo
  echo "$first_policy above fgd in ${#above[@]} of $cells cells${above:+: $(IFS=,; echo "${above[*]}" | sed 's/,/, /g')}"
fi
