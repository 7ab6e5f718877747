#!/usr/bin/env bash
# The prepared hardware check (docs/hardware.md): what gpupack decides, exercised against the real
# driver of the machine it runs on. It builds nothing of gpupack's (the agent comes from the
# gpu-check bundle, scripts/release-tarball.sh --gpu-check, or --agent); only the small CUDA probe
# (gpu-check/cap_probe.cu) is compiled, with the machine's nvcc, and its steps are skipped with
# the reason when there is no GPU or no nvcc. Each step has a timeout; the whole run stays under
# 5 minutes.
#
# Prints one line per check, "<ok|fail|skip> <name>: <detail>", and writes the JSON report
# (format: docs/hardware.md "Report format"). Exit status 0 when no check failed, 1 otherwise,
# 2 for bad arguments.
#
# usage: gpu-check.sh [--agent PATH] [--nvml-library PATH] [--cgroup-root DIR]
#                     [--mps-pipe-directory DIR] [--cap-mib N] [--atp PCT] [--report FILE]
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
agent=""
nvml_library=libnvidia-ml.so.1
cgroup_root=/sys/fs/cgroup
mps_pipe_directory=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
cap_mib=2048
atp=25
report=gpu-check-report.json
while [[ $# -gt 0 ]]; do
  case "$1" in
    --agent) agent=$2; shift 2 ;;
    --nvml-library) nvml_library=$2; shift 2 ;;
    --cgroup-root) cgroup_root=$2; shift 2 ;;
    --mps-pipe-directory) mps_pipe_directory=$2; shift 2 ;;
    --cap-mib) cap_mib=$2; shift 2 ;;
    --atp) atp=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$agent" ]]; then
  if [[ -x "$here/bin/gpupack-agent" ]]; then agent=$here/bin/gpupack-agent; else agent=$(command -v gpupack-agent || true); fi
fi
if [[ -z "$agent" || ! -x "$agent" ]]; then
  echo "gpu-check.sh: no gpupack-agent (pass --agent, or run from the gpu-check bundle)" >&2
  exit 2
fi
# The bundle's shared libraries travel in lib/ beside bin/; only the agent is given them (nvcc and
# the driver's tools keep the machine's own).
agent_cmd=("$agent")
if [[ -d "$(dirname "$agent")/../lib" ]]; then
  agent_cmd=(env "LD_LIBRARY_PATH=$(cd "$(dirname "$agent")/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$agent")
fi
probe_src=$here/gpu-check/cap_probe.cu
[[ -f "$probe_src" ]] || probe_src=$here/cap_probe.cu

started=$(date -u +%FT%TZ)
work=$(mktemp -d)
leaf=""
leaf_runner=()
mps_started=""
cleanup() {
  [[ -z "$mps_started" ]] || stop_mps
  remove_leaf
  rm -rf "$work"
}
trap cleanup EXIT

json_string() {  # a JSON string literal of $1
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/}
  printf '"%s"' "$s"
}

checks=()
failed=0
record() {  # record RESULT NAME DETAIL SECONDS
  echo "$1 $2: $3"
  checks+=("{\"name\":$(json_string "$2"),\"result\":\"$1\",\"detail\":$(json_string "$3"),\"seconds\":$4}")
  [[ "$1" == fail ]] && failed=1
  return 0
}

agent_flags=(--nvml-library "$nvml_library" --cgroup-root "$cgroup_root")
now() { date +%s; }

# 1. The doctor: every verdict, and what the node can enforce.
t0=$(now)
doctor_json=$work/doctor.json
if timeout 60 "${agent_cmd[@]}" --doctor --json "${agent_flags[@]}" --mps-pipe-directory "$mps_pipe_directory" \
    >"$doctor_json" 2>"$work/doctor.err" && grep -q '"checks"' "$doctor_json"; then
  can() { sed -n "s/^ *\"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$doctor_json" | head -1; }
  not_ok=$(paste -d' ' <(grep -o '"name": "[^"]*"' "$doctor_json" | cut -d'"' -f4) \
                       <(grep -o '"verdict": "[^"]*"' "$doctor_json" | cut -d'"' -f4) |
           awk '$2 != "ok" {printf "%s%s=%s", sep, $1, $2; sep=", "}')
  record ok doctor "memory hard $(can memoryHard), soft $(can memorySoft), compute $(can compute), MIG $(can mig); not ok: ${not_ok:-none}" $(( $(now) - t0 ))
  memory_hard=$(can memoryHard)
else
  record fail doctor "gpupack-agent --doctor failed: $(tail -c 300 "$work/doctor.err")" $(( $(now) - t0 ))
  echo '{}' >"$doctor_json"
  memory_hard=false
fi

# 2. One discovery pass: devices, memory, processes through NVML.
discover() {  # discover OUT: one --once --print pass into OUT
  timeout 60 "${agent_cmd[@]}" --node-name "$(hostname)" --once --print "${agent_flags[@]}" >"$1" 2>"$work/discover.err"
}
# The status' process list ("processes": [] when empty), one JSON line per field.
process_lines() { awk '/^    "processes": \[\]/ {exit} /^    "processes": \[/ {on=1; next} on && /^    \]/ {exit} on' "$1"; }
t0=$(now)
gpunode_json=$work/gpunode.json
if discover "$gpunode_json"; then
  gpus=$(sed -n 's/^    "gpus": \([0-9]*\),\{0,1\}$/\1/p' "$gpunode_json")
  mem=$(sed -n 's/^    "memoryMiB": \([0-9]*\),\{0,1\}$/\1/p' "$gpunode_json")
  procs=$(process_lines "$gpunode_json" | grep -c '"pid":')
  mode=$(grep -o '"mode": "[^"]*"' "$gpunode_json" | head -1 | cut -d'"' -f4)
  driver=$(grep -o '"driverVersion": "[^"]*"' "$gpunode_json" | head -1 | cut -d'"' -f4)
  if [[ "${gpus:-0}" -ge 1 ]]; then
    record ok discovery "${gpus} GPUs, ${mem} MiB, ${procs} processes, driver ${driver}, enforcement ${mode}" $(( $(now) - t0 ))
  else
    record fail discovery "no GPU discovered" $(( $(now) - t0 ))
  fi
else
  record fail discovery "gpupack-agent --once --print failed: $(tail -c 300 "$work/discover.err")" $(( $(now) - t0 ))
  echo '{}' >"$gpunode_json"
fi

# 3. The CUDA probe, built here with the machine's nvcc.
t0=$(now)
probe=$work/cap_probe
cuda_skip=""
nvcc=$(command -v nvcc || { [[ -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; } || true)
if ! command -v nvidia-smi >/dev/null; then
  cuda_skip="no NVIDIA GPU: nvidia-smi not found"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  cuda_skip="no NVIDIA GPU: nvidia-smi -L lists none"
elif [[ -z "$nvcc" ]]; then
  cuda_skip="nvcc not found (install the CUDA toolkit to run the CUDA steps)"
fi
if [[ -n "$cuda_skip" ]]; then
  record skip cuda-build "$cuda_skip" 0
elif timeout 120 "$nvcc" -O2 -std=c++17 -o "$probe" "$probe_src" >"$work/nvcc.log" 2>&1; then
  record ok cuda-build "$("$nvcc" --version | tail -1)" $(( $(now) - t0 ))
else
  cuda_skip="the CUDA probe did not build"
  record fail cuda-build "nvcc failed: $(tail -c 300 "$work/nvcc.log")" $(( $(now) - t0 ))
fi

# A container-shaped leaf cgroup (kubepods-…-pod<uid>.slice/cri-containerd-<id>.scope), so the
# agent's attribution reads the pod and container from it as it would on a node.
check_uid=6b1c0a2e-7d3f-4e5a-9b8c-0d1e2f3a4b5c
check_cid=$(printf 'c%.0s' {1..64})
make_leaf() {
  [[ $(id -u) -eq 0 && -w "$cgroup_root/cgroup.procs" ]] || return 1
  local slice=$cgroup_root/kubepods-gpucheck.slice
  local pod=$slice/kubepods-gpucheck-pod${check_uid//-/_}.slice
  mkdir -p "$pod/cri-containerd-$check_cid.scope" || return 1
  # dmem must be enabled on the leaf for a limit there (no-op where the kernel has none).
  for d in "$cgroup_root" "$slice" "$pod"; do echo +dmem >"$d/cgroup.subtree_control" 2>/dev/null; done
  leaf=$pod/cri-containerd-$check_cid.scope
  # Runs a command inside the leaf: the shell moves itself there, then becomes the command.
  leaf_runner=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$leaf")
}
remove_leaf() {
  [[ -n "$leaf" ]] || return 0
  # Zero the soft limit before the cgroup goes: the driver added it to every ancestor's reservation.
  nvidia-smi memory-limits --set --namespace "$leaf" --soft-limit 0 --hard-limit "$cap_mib" -i 0 >/dev/null 2>&1
  rmdir "$leaf" "$(dirname "$leaf")" "$(dirname "$(dirname "$leaf")")" 2>/dev/null
  leaf=""
  leaf_runner=()
}
start_mps() {  # a private MPS control daemon for the probe's client; $1: commands for it, then daemon flags
  command -v nvidia-cuda-mps-control >/dev/null || return 1
  mkdir -p "$work/mps" "$work/mps-log"
  CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_LOG_DIRECTORY=$work/mps-log nvidia-cuda-mps-control "${@:2}" -d \
    >"$work/mps-start.log" 2>&1 || return 1
  mps_started=1
  [[ -z "$1" ]] || echo "$1" | CUDA_MPS_PIPE_DIRECTORY=$work/mps timeout 10 nvidia-cuda-mps-control >/dev/null
}
stop_mps() {  # `quit` on stdin for a protocol-2 daemon, -q for protocol 3 (which has no shell)
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$work/mps timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
  [[ -e "$work/mps/control" ]] && CUDA_MPS_PIPE_DIRECTORY=$work/mps timeout 10 nvidia-cuda-mps-control -q >/dev/null 2>&1
  mps_started=""
  sleep 1
}
# Under the cap must allocate, beyond it must fail with out-of-memory; $@: how to run the probe.
under_and_beyond() {
  local under=$((cap_mib / 2)) beyond=$((cap_mib * 2)) out rc
  out=$(timeout 60 "$@" "$probe" alloc "$under"); rc=$?
  [[ $rc -eq 0 ]] || { echo "fail|under the cap ($under of $cap_mib MiB) failed: $out"; return; }
  out=$(timeout 60 "$@" "$probe" alloc "$beyond"); rc=$?
  [[ $rc -eq 3 ]] || { echo "fail|beyond the cap ($beyond of $cap_mib MiB) was not refused (exit $rc): $out"; return; }
  echo "ok|$under MiB allocated under a $cap_mib MiB cap; $beyond MiB refused: $out"
}

# 4. The memory cap: the cgroup limit on R615+, the MPS pinned-memory limit before it.
t0=$(now)
if [[ -n "$cuda_skip" ]]; then
  record skip memory-cap "$cuda_skip" 0
elif [[ "$memory_hard" == true ]]; then
  if ! make_leaf; then
    record skip memory-cap "the cgroup limit needs root and a writable cgroup v2 at $cgroup_root" 0
  elif ! nvidia-smi memory-limits --set --namespace "$leaf" --soft-limit "$cap_mib" --hard-limit "$cap_mib" -i 0 \
      >"$work/limits.log" 2>&1; then
    record fail memory-cap "nvidia-smi memory-limits --set failed: $(tail -c 300 "$work/limits.log")" $(( $(now) - t0 ))
  else
    IFS='|' read -r result detail < <(under_and_beyond "${leaf_runner[@]}")
    record "$result" memory-cap "cgroup limit on $leaf: $detail" $(( $(now) - t0 ))
  fi
else
  if start_mps "set_default_device_pinned_mem_limit 0 ${cap_mib}M"; then
    IFS='|' read -r result detail < <(under_and_beyond env CUDA_MPS_PIPE_DIRECTORY="$work/mps")
    record "$result" memory-cap "MPS pinned-memory limit (driver before R615, or no cgroup limits): $detail" $(( $(now) - t0 ))
    stop_mps
  else
    record fail memory-cap "no per-cgroup limits and the MPS control daemon does not start" $(( $(now) - t0 ))
  fi
fi

# The probe's SM count in $1: sets sm_count, used and allowed, the cap of --atp rounded to the
# hardware's granularity (⌈SMs × atp / 100⌉ + 2); within_cap RC is true when the probe exited RC = 0
# having used between 1 and allowed SMs.
read_sms() {
  sm_count=$(grep -o '"smCount":[0-9]*' "$1" | cut -d: -f2)
  used=$(grep -o '"smsUsed":[0-9]*' "$1" | cut -d: -f2)
  allowed=$(( (${sm_count:-0} * atp + 99) / 100 + 2 ))
}
within_cap() { [[ $1 -eq 0 && -n "$used" && "$used" -gt 0 && "$used" -le "$allowed" ]]; }

# 5. The compute cap: an MPS client under an active-thread percentage, its SMs counted.
t0=$(now)
if [[ -n "$cuda_skip" ]]; then
  record skip mps-compute-cap "$cuda_skip" 0
elif ! start_mps ""; then
  record skip mps-compute-cap "nvidia-cuda-mps-control not found or does not start" 0
else
  CUDA_MPS_PIPE_DIRECTORY=$work/mps CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$atp timeout 60 "$probe" sms 8 >"$work/sms.json" &
  sms_pid=$!
  sleep 4
  discover "$work/gpunode-sms.json"
  wait "$sms_pid"; rc=$?
  stop_mps
  read_sms "$work/sms.json"
  nvml_util=$(grep -o '"smUtilPct": [0-9]*' "$work/gpunode-sms.json" | head -1 | awk '{print $2}')
  detail="$used of $sm_count SMs used at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$atp (at most $allowed expected); NVML smUtilPct ${nvml_util:-not reported}"
  if within_cap "$rc"; then
    record ok mps-compute-cap "$detail" $(( $(now) - t0 ))
  else
    record fail mps-compute-cap "$detail (probe exit $rc: $(cat "$work/sms.json"))" $(( $(now) - t0 ))
  fi
fi

# 6. The compute cap of an MPS v3 namespace (R615+), made as gpupack-nri makes one (docs/agent.md
# "MPS v3 namespaces"): a private protocol-3, multi-user daemon, a root-owned server, a namespace
# capped at --atp; the agent with --mps-server reads the server; the probe joins the namespace's
# pipe directory asking for 100 % in its own env and must get the namespace's share.
t0=$(now)
mpsctl() { CUDA_MPS_PIPE_DIRECTORY=$work/mps timeout 10 nvidia-cuda-mps-control -p 3 "$@" >>"$work/ns.log" 2>&1; }
if [[ -n "$cuda_skip" ]]; then
  record skip mps-namespace-cap "$cuda_skip" 0
elif [[ $(id -u) -ne 0 ]]; then
  record skip mps-namespace-cap "needs root: a multi-user MPS daemon's servers are root's" 0
elif ! start_mps "" -p 3 -m; then
  record skip mps-namespace-cap "no MPS v3 control daemon (protocol 3 needs driver R615+): $(tail -c 200 "$work/mps-start.log")" 0
elif ! mpsctl server create gpucheck --uid=0 || ! mpsctl namespace create gpucheck_ns --server=gpucheck ||
     ! mpsctl namespace set gpucheck_ns --server=gpucheck --active-thread-percentage="$atp"; then
  record fail mps-namespace-cap "the daemon refused the server or namespace: $(tail -c 300 "$work/ns.log")" $(( $(now) - t0 ))
  stop_mps
else
  ns_dir=""
  for field in pipe-directory pipe_directory; do  # the manual's spelling, then KAI's for 615
    : >"$work/ns-get.log"
    CUDA_MPS_PIPE_DIRECTORY=$work/mps timeout 10 nvidia-cuda-mps-control -p 3 namespace get gpucheck_ns gpucheck \
      "$field" >"$work/ns-get.log" 2>&1 && ns_dir=$(grep -o '/[^ ,"]*' "$work/ns-get.log" | head -1) && break
  done
  timeout 60 "${agent_cmd[@]}" --node-name "$(hostname)" --once --print "${agent_flags[@]}" \
    --mps-pipe-directory "$work/mps" --mps-server gpucheck >"$work/gpunode-ns.json" 2>"$work/discover.err"
  reason=$(grep -o '"computeReason": "[^"]*"' "$work/gpunode-ns.json" | head -1 | cut -d'"' -f4)
  if [[ -z "$ns_dir" ]]; then
    record fail mps-namespace-cap "namespace get gave no pipe directory: $(tail -c 300 "$work/ns-get.log")" $(( $(now) - t0 ))
  else
    CUDA_MPS_PIPE_DIRECTORY=$ns_dir CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 timeout 60 "$probe" sms 8 >"$work/ns-sms.json"
    rc=$?
    read_sms "$work/ns-sms.json"
    detail="$used of $sm_count SMs used in namespace $ns_dir capped at $atp % with the client asking 100 % (at most $allowed expected); agent: ${reason:-no computeReason}"
    if within_cap "$rc" && [[ "$reason" == *"MPS v3 server gpucheck"* ]]; then
      record ok mps-namespace-cap "$detail" $(( $(now) - t0 ))
    else
      record fail mps-namespace-cap "$detail (probe exit $rc: $(cat "$work/ns-sms.json"))" $(( $(now) - t0 ))
    fi
  fi
  stop_mps
fi

# 7. Process → cgroup attribution: the probe's PID, memory and pod as the agent reports them.
t0=$(now)
if [[ -n "$cuda_skip" ]]; then
  record skip attribution "$cuda_skip" 0
else
  [[ -n "$leaf" ]] || make_leaf
  "${leaf_runner[@]}" "$probe" alloc 256 10 >"$work/hold.json" &
  hold_pid=$!
  sleep 4
  discover "$work/gpunode-hold.json"
  entry=$(process_lines "$work/gpunode-hold.json" | grep -A8 "\"pid\": $hold_pid,")
  wait "$hold_pid"
  if [[ -z "$entry" ]]; then
    record fail attribution "PID $hold_pid (holding 256 MiB) is not among the agent's processes" $(( $(now) - t0 ))
  elif [[ -n "$leaf" ]] && ! grep -q "\"podUID\": \"$check_uid\"" <<<"$entry"; then
    record fail attribution "PID $hold_pid found, but not attributed to pod $check_uid from $(cat /proc/self/cgroup 2>/dev/null | head -1)" $(( $(now) - t0 ))
  elif [[ -n "$leaf" ]]; then
    record ok attribution "PID $hold_pid → pod $check_uid, container ${check_cid:0:12}… (from its cgroup)" $(( $(now) - t0 ))
  else
    record ok attribution "PID $hold_pid found with its memory; pod attribution not tried (needs root and a writable cgroup v2)" $(( $(now) - t0 ))
  fi
fi

{
  printf '{"version":1,"host":%s,"kernel":%s,"startedAt":%s,"agent":%s,"nvmlLibrary":%s,"failed":%s,\n' \
    "$(json_string "$(hostname)")" "$(json_string "$(uname -r)")" "$(json_string "$started")" \
    "$(json_string "$agent")" "$(json_string "$nvml_library")" "$([[ $failed -eq 1 ]] && echo true || echo false)"
  printf '"checks":[%s],\n' "$(IFS=,; echo "${checks[*]}")"
  printf '"doctor":'; cat "$doctor_json"; printf ',\n"gpunode":'; cat "$gpunode_json"; printf '}\n'
} >"$report"
echo "report: $report"
exit "$failed"
