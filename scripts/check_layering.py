#!/usr/bin/env python3
"""Checks the include graph against the layers docs/design.md draws (issue 14).

Production code (everything but tests, benchmarks and test helpers) may include only its own
folder and the folders its layer lists below; nothing outside cmd/ includes cmd/; production code
never includes test code. Today's known upward edges are listed one by one in KNOWN_DEBT, so that
no new one can appear unnoticed and each one removed makes its entry fail as stale.

  check_layering.py [REPO_ROOT]     exit 0 when the tree keeps the layers, 1 naming each breach
"""
import os
import re
import sys

# Layer -> the other layers its production code may include. Lower layers never include higher.
ALLOWED = {
    "common": set(),
    "scheduler/core": {"common"},
    "api": {"common"},
    "kube": {"common"},
    "server": {"common"},
    "agent": {"common", "api", "kube"},
    "webhook": {"common", "api", "server"},
    "sim": {"common", "api", "scheduler/core"},
    "scheduler/extender": {"common", "api", "scheduler/core", "server"},
    "scheduler/cluster": {"common", "api", "kube", "scheduler/core", "scheduler/extender"},
    "cmd": {"common", "api", "kube", "server", "scheduler/core", "scheduler/extender",
            "scheduler/cluster", "agent", "webhook", "sim"},
}

# (file, included header): upward edges that exist today and are to be removed (docs/design.md,
# "Layers in the tree"). The domain model lives inside the placement core, so api's wire types
# include it; the core names annotation keys in its explanations.
KNOWN_DEBT = {
    ("api/allocation.h", "scheduler/core/model.h"),
    ("api/cluster_file.h", "scheduler/core/model.h"),
    ("api/cluster_file.cc", "scheduler/core/model.h"),
    ("api/gpunode.h", "scheduler/core/model.h"),
    ("api/pod_request.h", "scheduler/core/model.h"),
    ("scheduler/core/placement.cc", "api/annotations.h"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_DIRS = ["common", "api", "kube", "server", "agent", "webhook", "sim", "scheduler", "cmd",
               "e2e", "bench"]


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "scheduler" and len(parts) > 2:
        return "scheduler/" + parts[1]
    return parts[0]


def is_test_code(path):
    name = os.path.basename(path)
    return (name.endswith("_test.cc") or "/testing/" in path or path.startswith(("e2e/", "bench/"))
            or name.startswith("test_"))


def check(root):
    problems = []
    seen_debt = set()
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                layer = layer_of(path)
                test = is_test_code(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        target = layer_of(header)
                        where = f"{path}:{number}: includes {header}"
                        if target == "cmd" and layer != "cmd":
                            problems.append(f"{where}: nothing outside cmd/ may include cmd/")
                            continue
                        if test or target == layer or target not in ALLOWED:
                            continue
                        if is_test_code(header):
                            problems.append(f"{where}: production code includes test code")
                        elif target not in ALLOWED.get(layer, set()):
                            if (path, header) in KNOWN_DEBT:
                                seen_debt.add((path, header))
                            else:
                                allowed = ", ".join(sorted(ALLOWED.get(layer, set()))) or "nothing"
                                problems.append(f"{where}: {layer}/ may include only {allowed}")
    for path, header in sorted(KNOWN_DEBT - seen_debt):
        problems.append(f"KNOWN_DEBT lists {path} -> {header}, which is gone: remove the entry")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s); the layers are in scripts/check_layering.py "
              "and docs/design.md")
        return 1
    print("layering: every include keeps the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
