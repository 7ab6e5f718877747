#!/usr/bin/env python3
"""Writes deploy/gpupack.yaml, the plain manifests for clusters without Helm, from the chart with
ci/plain-manifests-values.yaml; with --check, fails when the file is out of date instead.

Usage: gen_deploy.py --helm BIN --chart DIR --out deploy/gpupack.yaml [--check]
"""

import argparse
import os
import sys

import yaml

import chartlib

HEADER = """\
# gpupack plain manifests, generated from charts/gpupack by charts/tests/gen_deploy.py with
# charts/gpupack/ci/plain-manifests-values.yaml. Do not edit; regenerate after chart changes.
#
# Needs cert-manager (the webhook's certificate) and Kubernetes >= 1.26. Before applying, set the
# kube-scheduler image tag below to your cluster's version or older (version skew policy):
#   kubectl apply -f deploy/gpupack.yaml
# With Helm, install the chart instead: it picks the kube-scheduler version and can generate the
# webhook certificate itself (docs/install.md).
---
apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
  labels:
    app.kubernetes.io/part-of: gpupack
"""


def generate(helm_bin, chart_dir):
    r = chartlib.Renderer(helm_bin, chart_dir)
    values = os.path.join(chart_dir, "ci", "plain-manifests-values.yaml")
    ok, out, err = r.render([values], kube_version="v1.30.0", api_versions=["cert-manager.io/v1"])
    if not ok:
        raise SystemExit("render failed: " + err)
    # Drop Helm hooks (the `helm test` pod): they mean nothing to kubectl.
    parts = out.split("\n---\n")
    kept = []
    for part in parts:
        part = part.strip("\n")
        if not part or part == "---":
            continue
        if part.startswith("---\n"):
            part = part[4:]
        docs = [d for d in yaml.safe_load_all(part) if d]
        if any((d.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook") for d in docs):
            continue
        if docs:
            kept.append(part)
    return HEADER.format(ns=chartlib.NAMESPACE) + "".join("---\n" + p + "\n" for p in kept)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", required=True, help="the helm binary")
    ap.add_argument("--chart", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = generate(args.helm, args.chart)
    if args.check:
        try:
            with open(args.out) as f:
                current = f.read()
        except OSError:
            current = None
        return chartlib.fail_if([] if current == text else
                                [f"{args.out} is out of date: run python3 charts/tests/gen_deploy.py --helm $(scripts/build-control-plane.sh)/helm "
                                 f"--chart charts/gpupack --out {args.out}"], "deploy/gpupack.yaml is up to date")
    with open(args.out, "w") as f:
        f.write(text)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
