#!/bin/sh
# A stand-in for nvidia-cuda-mps-control's namespace commands (MPS v3, driver R615+), for tests on
# machines without a GPU. It answers the verbs agent/mps_namespace.h sends, with the refusals the
# real daemon makes (NVIDIA's MPS v3 manual, "MPS v3 Interface", and KAI gpu-fractioning's reports
# from driver 615):
#   - no daemon: "$CUDA_MPS_PIPE_DIRECTORY/control" missing;
#   - an unknown server, an invalid or duplicate name, a missing namespace;
#   - set and delete while a client is attached.
# State lives in "$CUDA_MPS_PIPE_DIRECTORY/fake-state": servers/S (a server exists), S/NS/percent,
# S/NS/attached (a client is attached: tests touch it), log (every command, one per line).
# Pipe directories are "$CUDA_MPS_PIPE_DIRECTORY/S/NS", as the manual lays them out, created with
# the namespace. `get` answers the field pipe-directory (the manual's spelling), or only
# pipe_directory (KAI's, on 615) when FAKE_MPS_PIPE_FIELD=pipe_directory.
set -u
dir=${CUDA_MPS_PIPE_DIRECTORY:-}
if [ -z "$dir" ] || [ ! -e "$dir/control" ]; then
  echo "Cannot find MPS control daemon process" >&2
  exit 1
fi
state=$dir/fake-state
mkdir -p "$state"
echo "$*" >>"$state/log"
if [ "${1:-}" = "-p" ]; then shift 2; fi
[ "${1:-}" = namespace ] || { echo "unknown command: $*" >&2; exit 1; }
verb=${2:-}
shift 2
server=""
percent=""
args=""
for a in "$@"; do
  case $a in
    --server=*) server=${a#--server=} ;;
    --active-thread-percentage=*) percent=${a#--active-thread-percentage=} ;;
    *) args="$args $a" ;;
  esac
done
set -- $args
if [ "$verb" = get ]; then server=${2:-}; fi
[ -n "$server" ] && [ -e "$state/servers/$server" ] || { echo "Server '$server' not found" >&2; exit 1; }
ns=${1:-}
if [ "$verb" != list ]; then
  case $ns in
    "" | *[!a-z0-9_]*) echo "Invalid namespace name '$ns'" >&2; exit 1 ;;
  esac
fi
node=$state/$server/$ns
exists() { [ "$ns" = default ] || [ -d "$node" ]; }
case $verb in
  create)
    exists && { echo "Namespace '$ns' already exists" >&2; exit 1; }
    mkdir -p "$node" "$dir/$server/$ns"
    ;;
  set)
    exists || { echo "Namespace '$ns' not found" >&2; exit 1; }
    [ -e "$node/attached" ] && { echo "Cannot set: namespace '$ns' has active clients" >&2; exit 1; }
    mkdir -p "$node"
    echo "$percent" >"$node/percent"
    ;;
  get)
    exists || { echo "Namespace '$ns' not found" >&2; exit 1; }
    case ${3:-} in
      "${FAKE_MPS_PIPE_FIELD:-pipe-directory}") echo "$dir/$server/$ns" ;;
      active-thread-percentage) cat "$node/percent" 2>/dev/null || echo 100 ;;
      *) echo "Unknown field '${3:-}'" >&2; exit 1 ;;
    esac
    ;;
  delete)
    [ "$ns" != default ] && [ -d "$node" ] || { echo "Namespace '$ns' not found" >&2; exit 1; }
    [ -e "$node/attached" ] && { echo "Cannot delete: namespace '$ns' has active clients" >&2; exit 1; }
    rm -rf "$node" "$dir/$server/$ns"
    ;;
  list)
    echo default
    for n in "$state/$server"/*; do [ -d "$n" ] && [ "${n##*/}" != default ] && echo "${n##*/}"; done
    ;;
  *) echo "unknown namespace command '$verb'" >&2; exit 1 ;;
esac
exit 0
