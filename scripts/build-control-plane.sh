#!/usr/bin/env bash
# Builds the real control plane the `cluster` tests run against — etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and helm — from the Go modules pinned in
# tools/controlplane/go.mod, once, into a cache outside the repository, and prints the folder
# holding the binaries on stdout.
#
#   scripts/build-control-plane.sh            # build if missing, print the bin folder
#   scripts/build-control-plane.sh --dir      # print the bin folder only (CMake), build nothing
#   GPUPACK_CONTROLPLANE_CACHE=/x scripts/build-control-plane.sh
#
# The cache folder is <cache>/<key>/bin, where <key> hashes go.mod, go.sum, the Go version and the
# build flags: a changed pin builds a new folder, an unchanged one is reused in milliseconds.
# The first build compiles Kubernetes from source: expect ~13 minutes on 2 cores (see README).
# Needs Go >= 1.26 (GPUPACK_GO, default /usr/local/go/bin/go) and the Go module proxy (or a warm
# module cache); Debian's older golang-go is never used.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module_dir=$root/tools/controlplane
go_bin=${GPUPACK_GO:-/usr/local/go/bin/go}
cache_root=${GPUPACK_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpupack/controlplane}
tools=(etcd kube-apiserver kube-controller-manager kube-scheduler helm)

if [ ! -x "$go_bin" ]; then
  echo "build-control-plane: $go_bin not found; install Go >= 1.26 there or set GPUPACK_GO" >&2
  exit 1
fi
go_version=$("$go_bin" env GOVERSION)               # e.g. go1.26.8
minor=$(echo "$go_version" | sed -E 's/^go1\.([0-9]+).*/\1/')
if ! [[ $minor =~ ^[0-9]+$ ]] || [ "$minor" -lt 26 ]; then
  echo "build-control-plane: $go_bin is $go_version; Go >= 1.26 is required (set GPUPACK_GO)" >&2
  exit 1
fi

# Release builds stamp their versions at link time; without these a source-built kube-apiserver
# says v0.0.0-master and helm refuses every chart with a kubeVersion constraint.
module_version() { (cd "$module_dir" && GOFLAGS=-mod=readonly "$go_bin" list -m -f '{{.Version}}' "$1"); }
kube_version=$(module_version k8s.io/kubernetes)      # v1.34.4
kube_minor=$(echo "$kube_version" | cut -d. -f2)
helm_version=$(module_version helm.sh/helm/v3)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor -X $pkg.gitTreeState=clean"
done
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done
key=$(cat "$module_dir/go.mod" "$module_dir/go.sum" <(echo "$go_version $ldflags trimpath") |
      sha256sum | cut -c1-16)
bin_dir=$cache_root/$key/bin
if [ "${1:-}" = "--dir" ]; then
  echo "$bin_dir"
  exit 0
fi
complete=true
for t in "${tools[@]}"; do [ -x "$bin_dir/$t" ] || complete=false; done
if $complete; then
  echo "$bin_dir"
  exit 0
fi

mkdir -p "$cache_root/$key"
staging=$(mktemp -d "$cache_root/$key/build.XXXXXX")
trap 'rm -rf "$staging"' EXIT
echo "build-control-plane: building ${tools[*]} with $go_version into $bin_dir (first time: minutes)" >&2
start=$(date +%s)
# One `go build` for every tool so shared packages compile once. PATH puts the chosen Go first so
# nothing the build runs can reach Debian's /usr/bin/go.
(cd "$module_dir" &&
 PATH=$(dirname "$go_bin"):$PATH GOFLAGS="-trimpath -buildvcs=false -mod=readonly" CGO_ENABLED=0 \
   "$go_bin" build -ldflags="$ldflags" -o "$staging/" tool) >&2
# `go build` names a binary after its package path; etcd's main package is .../server/v3.
mv "$staging/server" "$staging/etcd"
for t in "${tools[@]}"; do
  [ -x "$staging/$t" ] || { echo "build-control-plane: $t was not built" >&2; exit 1; }
done
rm -rf "$bin_dir"
mv "$staging" "$bin_dir"
trap - EXIT
echo "build-control-plane: built in $(( $(date +%s) - start ))s" >&2
echo "$bin_dir"
