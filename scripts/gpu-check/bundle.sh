#!/usr/bin/env bash
# Lays out the gpu-check bundle (docs/hardware.md "Running the check") in DIR from a built
# gpupack-agent: bin/gpupack-agent; lib/ with every shared library ldd resolves for it except the
# C library's own (the target's glibc must be at least the build machine's; NVML is dlopened, so
# it comes from the target's driver); gpu-check.sh, gpu-check/cap_probe.cu and hardware.md.
# Used by scripts/release-tarball.sh --gpu-check and by the CTest gpu_check_fake_nvml.
#
# usage: bundle.sh DIR AGENT
set -euo pipefail
dir=$1
agent=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir/bin" "$dir/lib" "$dir/gpu-check"
install -m 0755 "$agent" "$dir/bin/gpupack-agent"
ldd "$agent" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*) continue ;;
  esac
  cp -L "$lib" "$dir/lib/"
done
install -m 0755 "$root/scripts/gpu-check.sh" "$dir/gpu-check.sh"
cp "$root/scripts/gpu-check/cap_probe.cu" "$dir/gpu-check/"
cp "$root/docs/hardware.md" "$dir/"
