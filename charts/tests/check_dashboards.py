#!/usr/bin/env python3
"""Dashboard and alert checks (CTest label `chart`).

- Each charts/gpupack/dashboards/*.json is valid classic Grafana JSON with a stable unique uid,
  a `datasource` variable that every panel, target and query variable uses, no `__inputs`, a
  unit on every panel, and units consistent with what the query computes.
- The JSON is what charts/tests/gen_dashboards.py generates, and the chart ships it unchanged.
- Every metric and label in every query (dashboards and the PrometheusRule) is in docs/metrics.md.
- With --extender/--agent/--webhook (the built binaries), every gpupack metric the dashboards and
  alerts use is in the /metrics output of the binary the catalog names, and every gpupack_
  metric a binary exports is in the catalog: dashboards, catalog and code cannot drift.

Usage: check_dashboards.py --helm BIN --chart DIR --catalog docs/metrics.md
                           [--extender BIN --agent BIN --webhook BIN --cluster FILE]
"""

import argparse
import glob
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

import chartlib
import gen_dashboards
from check_chart import start, post_json, openssl


def panels_of(board):
    for p in board.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "bargauge", "table", "text", "heatmap", "piechart"}
RATE_UNITS = {"reqps", "cps", "ops", "rps", "wps", "short"}


def expected_units(expr):
    """Units a query's result can have, or None when the check cannot tell."""
    e = expr.replace(" ", "")
    metrics = [m for m, _ in chartlib.selectors(expr)]
    if "histogram_quantile(" in e and "_seconds_bucket" in e:
        return {"s"}
    if "time()-" in e:
        return {"s"}
    if re.search(r"\)/\w*\(|\)/\(|_bytes\{[^}]*\}/", e) or re.search(r"\w\)/\w+\(", e):
        return {"percentunit"}
    if re.match(r"^(sum(by\([^)]*\))?\()?(rate|irate)\(", e):
        return RATE_UNITS
    if e.startswith("count("):
        return {"short", "none"}
    if metrics and "/" not in e and all(m.endswith("_bytes") or m == "DCGM_FI_DEV_FB_USED" for m in metrics):
        return {"bytes", "decbytes"}
    return None


def check_board(path, catalog):
    errs = []
    where = os.path.basename(path)
    try:
        board = chartlib.read_json(path)
    except (OSError, ValueError) as e:
        return [f"{where}: not valid JSON: {e}"], None
    if "__inputs" in board:
        errs.append(f"{where}: __inputs only works with UI import, not provisioning")
    if board.get("id") not in (None,):
        errs.append(f"{where}: id must be absent or null")
    if not re.fullmatch(r"[a-z0-9-]{1,40}", board.get("uid", "")):
        errs.append(f"{where}: uid {board.get('uid')!r} must be a stable slug")
    variables = board.get("templating", {}).get("list", [])
    ds = [v for v in variables if v.get("name") == "datasource"]
    if len(ds) != 1 or ds[0].get("type") != "datasource" or ds[0].get("query") != "prometheus":
        errs.append(f"{where}: needs one `datasource` variable of type datasource, query prometheus")
    for v in variables:
        if v.get("type") == "query":
            if v.get("datasource", {}).get("uid") != "${datasource}":
                errs.append(f"{where}: variable {v['name']} does not use ${{datasource}}")
            q = v.get("query", {})
            q = q.get("query", "") if isinstance(q, dict) else q
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
            if not m:
                errs.append(f"{where}: variable {v['name']}: query {q!r} is not label_values(selector, label)")
                continue
            e, found = chartlib.check_expr(m.group(1), catalog, f"{where} variable {v['name']}")
            errs += e
            for metric in found:
                labels = catalog.get(metric, {}).get("labels", set()) | chartlib.TARGET_LABELS
                if m.group(2) not in labels:
                    errs.append(f"{where}: variable {v['name']}: {metric} has no label {m.group(2)}")
    ids = set()
    exprs = []
    cells = {}
    for p in panels_of(board):
        g = p.get("gridPos", {})
        if p.get("type") not in PANEL_TYPES:
            errs.append(f"{where} panel {p.get('title')!r}: type {p.get('type')!r} is not a core panel")
        if g.get("x", 0) + g.get("w", 0) > 24 or g.get("w", 0) <= 0 or g.get("h", 0) <= 0:
            errs.append(f"{where} panel {p.get('title')!r}: gridPos {g} is outside the 24-column grid")
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in cells:
                    errs.append(f"{where} panel {p.get('title')!r} overlaps {cells[(x, y)]!r}")
                    break
                cells[(x, y)] = p.get("title")
            else:
                continue
            break
        pw = f"{where} panel {p.get('title')!r}"
        if p.get("id") in ids:
            errs.append(f"{pw}: duplicate panel id")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            errs.append(f"{pw}: no gridPos")
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errs.append(f"{pw}: datasource is not ${{datasource}}")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if not unit:
            errs.append(f"{pw}: no unit")
        if not p.get("targets"):
            errs.append(f"{pw}: no queries")
        if not p.get("description"):
            errs.append(f"{pw}: no description (operators read it in the panel's tooltip)")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errs.append(f"{pw}: target {t.get('refId')} datasource is not ${{datasource}}")
            expr = t.get("expr", "")
            if not expr:
                errs.append(f"{pw}: target {t.get('refId')} has no expr")
                continue
            e, _ = chartlib.check_expr(expr, catalog, pw)
            errs += e
            exprs.append(expr)
            want = expected_units(expr)
            if want and unit not in want and p.get("type") != "table":
                errs.append(f"{pw}: unit {unit!r} but the query computes {sorted(want)}: {expr[:90]}")
    return errs, board


def rule_exprs(renderer):
    # agent.nri on too, so the alert on gpupack-nri is checked with the others.
    docs, _ = renderer.render_docs([], sets=["prometheus.rules.enabled=true", "agent.nri.enabled=true"],
                                   api_versions=chartlib.CI_API_VERSIONS)
    out = []
    for d in docs:
        if d.get("kind") == "PrometheusRule":
            for g in d["spec"]["groups"]:
                for r in g["rules"]:
                    out.append((r["alert"], r["expr"]))
    return out


def check_shipped(renderer, chart_dir):
    """The chart ships each dashboard byte for byte, labelled for Grafana's sidecar."""
    errs = []
    docs, _ = renderer.render_docs([], sets=["dashboards.enabled=true", "dashboards.namespace=monitoring"])
    cms = [d for d in docs if d.get("kind") == "ConfigMap" and "-dashboard-" in d["metadata"]["name"]]
    files = sorted(glob.glob(os.path.join(chart_dir, "dashboards", "*.json")))
    if len(cms) != len(files):
        errs.append(f"{len(cms)} dashboard ConfigMaps for {len(files)} dashboards")
    shipped = {k: v for cm in cms for k, v in cm.get("data", {}).items()}
    for f in files:
        with open(f) as fh:
            if shipped.get(os.path.basename(f)) != fh.read():
                errs.append(f"{os.path.basename(f)} is not shipped unchanged")
    for cm in cms:
        if cm["metadata"]["labels"].get("grafana_dashboard") != "1" or cm["metadata"]["namespace"] != "monitoring":
            errs.append(f"ConfigMap {cm['metadata']['name']}: sidecar label or namespace wrong")
    return errs


# ---- live /metrics --------------------------------------------------------------------------------

def scrape(url, insecure_tls=False):
    ctx = None
    if insecure_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=5, context=ctx) as resp:
        return resp.read().decode()


def families(text):
    """{family: {label: set(values)}} from the Prometheus text format."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            out.setdefault(m.group(1), {})
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        if m and not line.startswith("#"):
            name, _ = chartlib.base_metric(m.group(1))
            fam = out.setdefault(name if name in out else m.group(1), {})
            for label, value in re.findall(r'(\w+)="((?:\\.|[^"\\])*)"', m.group(3) or ""):
                if label != "le":
                    fam.setdefault(label, set()).add(value)
    return out


def live_metrics(args):
    """{binary: {family: labels}} scraped from the binaries after a little traffic, so labelled
    families have samples."""
    result = {}
    if args.extender and args.cluster:
        result["extender"] = scrape_extender(args)
        if args.test_apiserver:
            for fam, labels in scrape_extender_on_cluster(args).items():
                merged = result["extender"].setdefault(fam, {})
                for label, values in labels.items():
                    merged.setdefault(label, set()).update(values)
    if args.agent and args.cluster and args.test_apiserver:
        result["agent"] = scrape_agent(args)
    if args.webhook:
        result["webhook"] = scrape_webhook(args)
    return result


def scrape_extender(args):
    with open(args.cluster) as f:
        cluster = yaml.safe_load(f)
    proc, addr = start([args.extender, "--standalone-cluster", args.cluster, "--listen", "127.0.0.1:0"])
    try:
        node_names = [n["name"] for n in cluster["nodes"]]
        pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
               "spec": {"containers": [{"name": "main", "resources": {"limits": {"gpupack.io/gpu-memory": "1Gi"}}}]}}
        huge = json.loads(json.dumps(pod))
        huge["spec"]["containers"][0]["resources"]["limits"]["gpupack.io/gpu-memory"] = "100Ti"
        for body in ({"Pod": pod, "Nodes": None, "NodeNames": node_names},
                     {"Pod": huge, "Nodes": None, "NodeNames": node_names}):
            post_json(f"http://{addr}/filter", body)
        post_json(f"http://{addr}/prioritize", {"Pod": pod, "Nodes": None, "NodeNames": node_names})
        post_json(f"http://{addr}/bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "u-1", "Node": node_names[0]})
        return families(scrape(f"http://{addr}/metrics"))
    finally:
        stop(proc)


def scrape_extender_on_cluster(args):
    """The extender against the e2e test API server: the cluster-mode families (informers)."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = os.path.join(tmp, "kubeconfig")
        api, _ = start([args.test_apiserver, "--kubeconfig-out", kubeconfig])
        ext = None
        try:
            ext, addr = start([args.extender, "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:0"])
            return families_once(addr, "gpupack_kube_last_sync_timestamp_seconds")
        finally:
            stop(ext, api)


def families_once(addr, family, timeout=15):
    """The binary's metric families once `family` has samples (or after `timeout` seconds)."""
    deadline = time.time() + timeout
    while True:
        fams = families(scrape(f"http://{addr}/metrics"))
        if family in fams or time.time() > deadline:
            return fams
        time.sleep(0.2)


def stop(*processes):
    for p in processes:
        if p is not None:
            p.terminate()
            p.wait(timeout=10)


def scrape_agent(args):
    """The agent needs an API server: the e2e test API server, with one gpupack pod on the node so
    the per-container families have samples."""
    with open(args.cluster) as f:
        node = yaml.safe_load(f)["nodes"][0]
    with tempfile.TemporaryDirectory() as tmp:
        node_file, kubeconfig = os.path.join(tmp, "node.yaml"), os.path.join(tmp, "kubeconfig")
        with open(node_file, "w") as f:
            yaml.safe_dump(node, f)
        printed = subprocess.run([args.agent, "--node-name", node["name"], "--backend", "file:" + node_file,
                                  "--once", "--print"], capture_output=True, text=True, timeout=30)
        if printed.returncode != 0:
            raise AssertionError(f"gpupack-agent --once --print: {printed.stderr[:300]}")
        device = json.loads(printed.stdout)["status"]["devices"][0]
        api, api_addr = start([args.test_apiserver, "--kubeconfig-out", kubeconfig])
        agent = None
        try:
            allocation = {"v": 1, "node": node["name"], "containers": [
                {"name": "main", "devices": [{"uuid": device["uuid"], "index": device["index"], "memMiB": 1024}]}]}
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p1", "namespace": "default", "uid": "uid-1",
                                "annotations": {"gpupack.io/allocation": json.dumps(allocation)}},
                   "spec": {"nodeName": node["name"], "containers": [
                       {"name": "main", "image": "x", "resources": {"limits": {"gpupack.io/gpu-memory": "1Gi"}}}]},
                   "status": {"phase": "Running"}}
            post_json(f"http://{api_addr}/api/v1/namespaces/default/pods", pod)
            agent, addr = start([args.agent, "--node-name", node["name"], "--backend", "file:" + node_file,
                                 "--listen", "127.0.0.1:0", "--kubeconfig", kubeconfig,
                                 "--cgroup-root", os.path.join(tmp, "cgroup"), "--proc-root", os.path.join(tmp, "proc")])
            return families_once(addr, "gpupack_agent_container_memory_cap_bytes")
        finally:
            stop(agent, api)


def scrape_webhook(args):
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
           "spec": {"containers": [{"name": "main", "resources": {"limits": {"gpupack.io/gpu-memory": "1Gi"}}}]}}
    with tempfile.TemporaryDirectory() as tmp:
        crt, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                "-subj", "/CN=gpupack-webhook")
        proc, addr = start([args.webhook, "--listen", "127.0.0.1:0", "--tls-cert-file", crt, "--tls-key-file", key])
        try:
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"uid": "r1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                  "operation": "CREATE", "namespace": "default", "object": pod}}
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            req = urllib.request.Request(f"https://{addr}/mutate", data=json.dumps(review).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5, context=ctx).read()
            return families(scrape(f"https://{addr}/metrics", insecure_tls=True))
        finally:
            stop(proc)


def declared_in(binary_path, name):
    """Whether the binary holds the metric's name: a family with no samples in this run (e.g.
    NVML errors with the file backend) is still exported when it has them."""
    with open(binary_path, "rb") as f:
        return name.encode() in f.read()


def check_live(catalog, used, live, binaries):
    errs = []
    for metric, where in sorted(used.items()):
        base, _ = chartlib.base_metric(metric)
        name = metric if metric in catalog else base
        entry = catalog.get(name)
        if entry is None or not name.startswith("gpupack_"):
            continue
        for binary in re.findall(r"extender|agent|webhook", entry["binary"]):
            if binary not in live:
                continue  # not built in this tree: checked against the catalog only
            if name not in live[binary]:
                if declared_in(binaries[binary], name):
                    print(f"note: {name} had no samples in this run of gpupack-{binary}; its name is in the binary")
                else:
                    errs.append(f"{name} (used by {where}) is not exported by gpupack-{binary}")
    for binary, fams in live.items():
        for fam, labels in sorted(fams.items()):
            if not fam.startswith("gpupack_"):
                continue
            entry = catalog.get(fam)
            if entry is None:
                errs.append(f"gpupack-{binary} exports {fam}, which docs/metrics.md does not list")
                continue
            if binary not in entry["binary"]:
                errs.append(f"gpupack-{binary} exports {fam}, which docs/metrics.md assigns to {entry['binary']}")
            extra = set(labels) - entry["labels"]
            missing = entry["labels"] - set(labels) if labels else set()
            if extra or missing:
                errs.append(f"gpupack-{binary} {fam}: labels {sorted(labels)}, catalog {sorted(entry['labels'])}")
            for label, values in labels.items():
                enum = entry.get("enums", {}).get(label)
                if enum is not None and values - enum:
                    errs.append(f"gpupack-{binary} {fam}: {label} values {sorted(values - enum)} are not in the catalog's {sorted(enum)}")
    return errs


def check_sources(catalog, source_root):
    """Every gpupack_ metric name in the C++ sources (tests excluded) is in the catalog, so a
    metric added in code without a catalog row fails even before the binaries are built."""
    errs = []
    for path in glob.glob(os.path.join(source_root, "**", "*.cc"), recursive=True) + \
            glob.glob(os.path.join(source_root, "**", "*.h"), recursive=True):
        rel = os.path.relpath(path, source_root)
        if rel.startswith(("build", "charts", ".")) or rel.endswith("_test.cc") or "/testing/" in rel:
            continue
        with open(path, errors="replace") as f:
            for name in re.findall(r'"(gpupack_[a-z0-9_]+)"', f.read()):
                if name not in catalog and chartlib.base_metric(name)[0] not in catalog:
                    errs.append(f"{rel}: metric {name} is not in docs/metrics.md")
    return sorted(set(errs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", required=True, help="the helm binary")
    ap.add_argument("--chart", required=True)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--extender")
    ap.add_argument("--agent")
    ap.add_argument("--webhook")
    ap.add_argument("--cluster")
    ap.add_argument("--test-apiserver", help="e2e/gpupack-test-apiserver, the API server the agent needs")
    ap.add_argument("--source-root", help="repository root: metric names in the C++ sources must be catalogued")
    args = ap.parse_args()
    catalog = chartlib.load_catalog(args.catalog)
    renderer = chartlib.Renderer(args.helm, args.chart)
    failed = 0
    if len(catalog) < 20:
        failed += chartlib.fail_if([f"only {len(catalog)} metrics parsed from {args.catalog}"], "catalog parses")

    files = sorted(glob.glob(os.path.join(args.chart, "dashboards", "*.json")))
    generated = gen_dashboards.render_all()
    stale = [os.path.basename(f) for f in files if generated.get(os.path.basename(f)) != open(f).read()]
    stale += [n for n in generated if n not in map(os.path.basename, files)]
    failed += chartlib.fail_if([f"{n} differs from gen_dashboards.py output (run charts/tests/gen_dashboards.py)" for n in stale],
                               "dashboards match their generator")
    uids, used = {}, {}
    for f in files:
        errs, board = check_board(f, catalog)
        if board:
            if board.get("uid") in uids:
                errs.append(f"uid {board['uid']} used by {uids[board['uid']]} too")
            uids[board.get("uid")] = os.path.basename(f)
            for p in panels_of(board):
                for t in p.get("targets", []):
                    for metric, _ in chartlib.selectors(t.get("expr", "")):
                        used.setdefault(metric, f"{os.path.basename(f)} {p.get('title')!r}")
        failed += chartlib.fail_if(errs, f"{os.path.basename(f)}")
    if len(files) < 3:
        failed += chartlib.fail_if([f"{len(files)} dashboards, want scheduler, capacity and workloads"], "dashboards present")

    rule_errs = []
    rules = rule_exprs(renderer)
    if len(rules) < 5:
        rule_errs.append(f"{len(rules)} alert rules rendered, want 5")
    for alert, expr in rules:
        e, found = chartlib.check_expr(expr, catalog, f"alert {alert}")
        rule_errs += e
        for metric in found:
            used.setdefault(metric, f"alert {alert}")
    failed += chartlib.fail_if(rule_errs, "alert expressions use catalogued metrics")
    failed += chartlib.fail_if(check_shipped(renderer, args.chart), "dashboards shipped as sidecar ConfigMaps")
    if args.source_root:
        failed += chartlib.fail_if(check_sources(catalog, args.source_root), "metric names in the sources are catalogued")

    try:
        live = live_metrics(args)
        errs = check_live(catalog, used, live, {"extender": args.extender, "agent": args.agent, "webhook": args.webhook})
    except (AssertionError, OSError, ValueError, subprocess.SubprocessError) as e:
        live, errs = {}, [f"could not scrape the binaries: {e}"]
    if live or errs:
        failed += chartlib.fail_if(errs, f"dashboards, alerts and catalog match /metrics of {sorted(live)}")
    missing = sorted({"extender", "agent", "webhook"} - set(live))
    if missing:
        print(f"note: not built here: {missing}; their metrics were checked against docs/metrics.md only")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
