#!/usr/bin/env python3
"""scripts/gpu-check.sh end to end against the fake libnvidia-ml (CTest gpu_check_fake_nvml).

Lays out the bundle (bundle.sh) from the real gpupack-agent, and runs the bundled script twice: on a node the fake library plays (two H200s, one
in MIG mode) with a temporary cgroup tree, where every check passes or, without a GPU, is skipped
with its reason; and with no NVML library at all, where discovery must fail and the report say so.
Checks the printed lines against the JSON report (docs/hardware.md "Report format").
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

BUNDLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundle.sh")
CHECKS = ["doctor", "discovery", "cuda-build", "memory-cap", "mps-compute-cap", "mps-namespace-cap", "attribution"]
CUDA_CHECKS = CHECKS[2:]


def run(bundle, env, report):
    cmd = [os.path.join(bundle, "gpu-check.sh"), "--report", report] + env["flags"]
    proc = subprocess.run(cmd, env=env["env"], capture_output=True, text=True, timeout=300)
    with open(report) as f:
        return proc, json.load(f)


def expect(cond, what, proc):
    if not cond:
        sys.exit(f"FAIL: {what}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", required=True)
    parser.add_argument("--nvml-library", required=True)
    parser.add_argument("--state", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    try:
        cgroup = os.path.join(work, "cgroup")
        os.makedirs(os.path.join(cgroup, "kubepods.slice"))
        with open(os.path.join(cgroup, "cgroup.controllers"), "w") as f:
            f.write("cpu memory dmem\n")
        mps = os.path.join(work, "mps")
        os.makedirs(mps)
        os.mkfifo(os.path.join(mps, "control"))
        bundle = os.path.join(work, "bundle")
        subprocess.run(["bash", BUNDLE, bundle, args.agent], check=True)
        libs = os.listdir(os.path.join(bundle, "lib"))
        if "libstdc++.so.6" not in libs or any(l.startswith("libc.so") for l in libs):
            sys.exit(f"FAIL: the bundle carries the agent's libraries but not the C library's: {sorted(libs)}")
        env = dict(os.environ, GPUPACK_FAKE_NVML_STATE=args.state)
        no_gpu = shutil.which("nvidia-smi") is None

        flags = ["--nvml-library", args.nvml_library, "--cgroup-root", cgroup, "--mps-pipe-directory", mps]
        proc, report = run(bundle, {"env": env, "flags": flags}, os.path.join(work, "good.json"))
        expect(proc.returncode == 0, f"exit 0 on the fake node, got {proc.returncode}", proc)
        lines = [l for l in proc.stdout.splitlines() if not l.startswith("report: ")]
        expect([r["name"] for r in report["checks"]] == CHECKS, "every check, in order, in the report", proc)
        for line, check in zip(lines, report["checks"]):
            expect(line == f'{check["result"]} {check["name"]}: {check["detail"]}', f"line {line!r} is its check", proc)
        by_name = {c["name"]: c for c in report["checks"]}
        expect(by_name["doctor"]["result"] == "ok", "the doctor ran", proc)
        expect("memory hard true" in by_name["doctor"]["detail"], "R615 and dmem in the tree: hard memory", proc)
        expect(by_name["discovery"]["result"] == "ok", "discovery ran", proc)
        expect(by_name["discovery"]["detail"].startswith("2 GPUs, 287542 MiB, 1 processes, driver 615.20"),
               "two H200s (2 x 143771 MiB) and the fake's one process", proc)
        if no_gpu:
            for name in CUDA_CHECKS:
                expect(by_name[name] == {"name": name, "result": "skip", "detail": "no NVIDIA GPU: nvidia-smi not found",
                                         "seconds": 0}, f"{name} skipped with its reason", proc)
        verdicts = {c["name"]: c["verdict"] for c in report["doctor"]["checks"]}
        expect(verdicts["nvml"] == "ok" and verdicts["memory-limits"] == "ok" and verdicts["mps"] == "ok",
               f"the doctor's verdicts travel in the report: {verdicts}", proc)
        expect(verdicts["mig"] == "ok" and report["doctor"]["can"]["mig"] is True, "the MIG GPU has instances", proc)
        expect(len(report["gpunode"]["status"]["devices"]) == 2, "the GPUNode travels in the report", proc)
        expect(report["failed"] is False and report["version"] == 1, "not failed, version 1", proc)

        flags = ["--nvml-library", os.path.join(work, "absent", "libnvidia-ml.so.1"), "--cgroup-root", cgroup]
        proc, report = run(bundle, {"env": env, "flags": flags}, os.path.join(work, "bad.json"))
        expect(proc.returncode == 1, f"exit 1 without a driver, got {proc.returncode}", proc)
        by_name = {c["name"]: c for c in report["checks"]}
        expect(by_name["doctor"]["result"] == "ok", "the doctor still reports", proc)
        expect("nvml=missing" in by_name["doctor"]["detail"], "and says NVML is missing", proc)
        expect(by_name["discovery"]["result"] == "fail", "discovery fails", proc)
        expect(report["failed"] is True and report["gpunode"] == {}, "the report says so", proc)
    finally:
        shutil.rmtree(work)
    print("gpu-check.sh: both runs as expected")


if __name__ == "__main__":
    main()
