#!/usr/bin/env python3
"""Checks the include graph against the layers docs/design.md draws.

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
# The stack, bottom up: common (base utilities) and model (the domain's plain values) include
# nothing of each other's; placement (the pure engine) and api (wire types) both stand on the
# model and never include each other; translate maps wire to model; kube and server are the I/O
# edges; the parts (agent, webhook, sim, scheduler/extender, scheduler/cluster) use those; cmd/
# wires parts into binaries.
ALLOWED = {
    "common": set(),
    "model": set(),
    "placement": {"common", "model"},
    "api": {"common", "model"},
    "translate": {"common", "model", "api"},
    "kube": {"common"},
    "server": {"common"},
    "agent": {"common", "model", "api", "translate", "kube", "server"},
    "webhook": {"common", "model", "api", "translate", "server"},
    "sim": {"common", "model", "api", "translate", "placement"},
    "scheduler/extender": {"common", "model", "api", "translate", "placement", "server"},
    "scheduler/cluster": {"common", "model", "api", "translate", "kube", "placement",
                          "scheduler/extender"},
    "cmd": {"common", "model", "api", "translate", "kube", "server", "placement",
            "scheduler/extender", "scheduler/cluster", "agent", "webhook", "sim"},
}

# (file, included header): upward edges that exist today and are to be removed. Empty: every
# include keeps the layers. An entry is for a known exception being worked off, never a new one.
KNOWN_DEBT = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_DIRS = ["common", "model", "placement", "api", "translate", "kube", "server", "agent", "webhook",
               "sim", "scheduler", "cmd", "testing", "e2e", "bench", "fuzz"]


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "scheduler" and len(parts) > 2:
        return "scheduler/" + parts[1]
    return parts[0]


def is_test_code(path):
    name = os.path.basename(path)
    return (name.endswith("_test.cc") or "/testing/" in path
            or path.startswith(("testing/", "e2e/", "bench/", "fuzz/"))
            or name.startswith("test_"))


def sources(root, folders=SOURCE_DIRS, production_only=False):
    """Yields (path relative to root, text) for every .cc and .h below the folders, in order."""
    for top in folders:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if production_only and is_test_code(path):
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    yield path, f.read()


def check(root, known_debt=None):
    """Returns one message per breach; known_debt defaults to KNOWN_DEBT."""
    known_debt = KNOWN_DEBT if known_debt is None else known_debt
    problems = []
    seen_debt = set()
    for path, text in sources(root):
        layer = layer_of(path)
        test = is_test_code(path)
        for number, line in enumerate(text.splitlines(), 1):
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
                if (path, header) in known_debt:
                    seen_debt.add((path, header))
                else:
                    allowed = ", ".join(sorted(ALLOWED.get(layer, set()))) or "nothing"
                    problems.append(f"{where}: {layer}/ may include only {allowed}")
    for path, header in sorted(known_debt - seen_debt):
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
