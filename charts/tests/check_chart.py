#!/usr/bin/env python3
"""Chart checks (CTest label `chart`). Lints (`helm lint --strict`) and renders (`helm template`,
the real helm built by scripts/build-control-plane.sh) charts/gpupack with default values, every
ci/*-values.yaml and the shapes in LINT_SHAPES, and checks what a cluster would reject or mis-run: YAML and required fields per
kind, cross-references (selectors, ports, volumes, service accounts), the KubeSchedulerConfiguration
against kube-scheduler's v1 schema and the extender's routes, least-privilege RBAC against the API
calls each binary makes, the webhook's certificates and selectors, the agent's host access, the
GPUNode CRD against the status the agent writes, values.schema.json coverage and refusals.

Usage: check_chart.py --helm BIN --chart DIR [--extender BIN --agent BIN --webhook BIN
                      --cluster FILE]
The optional binaries add live checks: the extender started with the rendered extender.yaml must
answer POST {urlPrefix}/filter etc.; the agent's printed GPUNode status must fit the CRD schema;
the webhook must accept the rendered webhook.yaml.
"""

import argparse
import base64
import glob
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

import chartlib
from chartlib import NAMESPACE, CI_API_VERSIONS

NAMESPACED = {"ConfigMap", "Deployment", "DaemonSet", "Service", "ServiceAccount", "Role",
              "RoleBinding", "PodDisruptionBudget", "Secret", "ServiceMonitor", "PrometheusRule",
              "Issuer", "Certificate", "Pod"}
API_VERSIONS = {
    "ConfigMap": "v1", "Service": "v1", "ServiceAccount": "v1", "Secret": "v1", "Pod": "v1",
    "Deployment": "apps/v1", "DaemonSet": "apps/v1", "PodDisruptionBudget": "policy/v1",
    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "ServiceMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1",
    "Issuer": "cert-manager.io/v1", "Certificate": "cert-manager.io/v1",
}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# kube-scheduler config v1 keys (kubernetes/kubernetes staging/src/k8s.io/kube-scheduler/config/v1
# types.go; the decoder is strict, so an unknown key stops kube-scheduler at start-up).
KSC_KEYS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
            "healthzBindAddress", "metricsBindAddress", "enableProfiling",
            "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
            "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
LEADER_KEYS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
               "resourceName", "resourceNamespace"}
PROFILE_KEYS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
EXTENDER_KEYS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
                 "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
                 "ignorable"}
MANAGED_KEYS = {"name", "ignoredByScheduler"}
# The extender's routes (docs/extender.md "Endpoints"): POST {prefix}/<verb>.
EXTENDER_ROUTES = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
                   "preemptVerb": "preempt"}
GPUPACK_RESOURCES = {"gpupack.io/gpu-memory", "gpupack.io/gpu", "gpupack.io/gpu-compute"}

# Keys gpupack-webhook's config accepts (webhook/config.cc); checked live when the binary exists.
WEBHOOK_CONFIG_KEYS = {"schedulerName", "allowCustomSchedulerName", "failurePolicy", "userDeviceEnv",
                       "maxDevicesPerContainer", "maxDeviceMemory", "certCheckIntervalSeconds",
                       "workerThreads", "wholeDeviceCharge"}

# ---- the API calls each binary makes ------------------------------------------------------------
# From the code (scheduler/cluster/kube_backend.cc, agent/kube_sink.cc, cmd/agent/main.cc,
# kube/client.cc) and docs/agent.md "GPUNode status", docs/kubernetes.md. (apiGroup, resource[/subresource], verb, namespace or
# None for cluster scope / all namespaces, resourceName or None)
def extender_calls(ns, scheduler_name, defrag_on=True):
    calls = [
        ("", "pods", "list", None, None), ("", "pods", "watch", None, None),  # informer, fresh read
        ("", "pods", "get", None, None),                                      # the pod before a bind
        ("", "pods/binding", "create", None, None),
        ("gpupack.io", "gpunodes", "list", None, None), ("gpupack.io", "gpunodes", "watch", None, None),
        ("", "events", "create", None, None),
        # kube-scheduler's leader election on its own Lease (client-go leaselock: get, create,
        # update; the system role only covers kube-system/kube-scheduler), and the extender's
        # per-node bind fences "gpupack-fence-<node>" (scheduler/cluster/kube_backend.h).
        ("coordination.k8s.io", "leases", "create", ns, None),
        ("coordination.k8s.io", "leases", "get", ns, scheduler_name),
        ("coordination.k8s.io", "leases", "update", ns, scheduler_name),
        ("coordination.k8s.io", "leases", "get", ns, "gpupack-fence-gpu-a1"),
        ("coordination.k8s.io", "leases", "update", ns, "gpupack-fence-gpu-a1"),
    ]
    # EvictPod (scheduler/cluster/kube_backend.cc), only with defragmentation on: least privilege.
    if defrag_on:
        calls.append(("", "pods/eviction", "create", None, None))
    return calls


def agent_calls(foreign_pod_eviction):
    calls = [
        ("gpupack.io", "gpunodes", "get", None, None), ("gpupack.io", "gpunodes", "create", None, None),
        ("gpupack.io", "gpunodes", "list", None, None),  # --doctor --cluster (the helm test)
        ("gpupack.io", "gpunodes/status", "update", None, None),  # UpsertGpuNodeStatus
        ("", "nodes", "get", None, None), ("", "nodes/status", "patch", None, None),  # capacity; excluded devices
        ("", "pods", "list", None, None), ("", "pods", "watch", None, None),  # informer on its node
        ("", "events", "create", None, None),
    ]
    # EvictPod (agent/kube_sink.cc), only with agent.foreignPodEviction.enabled: least privilege.
    if foreign_pod_eviction:
        calls.append(("", "pods/eviction", "create", None, None))
    return calls


# Every call the agent's code can make (the policy on).
AGENT_CALLS = agent_calls(True)
# Roles the scheduler pod may be bound to besides its own (kube-scheduler's built-ins).
SYSTEM_ROLES = {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler"),
                ("Role", "extension-apiserver-authentication-reader")}


class Manifests:
    def __init__(self, docs):
        self.docs = docs

    def of(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def get(self, kind, name, ns=None):
        for d in self.of(kind):
            md = d.get("metadata", {})
            if md.get("name") == name and (ns is None or md.get("namespace") == ns):
                return d
        return None


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def arg_after(cmd, flag):
    for i, a in enumerate(cmd):
        if a == flag and i + 1 < len(cmd):
            return cmd[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def container(workload, name):
    for c in pod_spec(workload)["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"{workload['metadata']['name']}: no container {name}")


def workload_of(m, component):
    for kind in ("Deployment", "DaemonSet"):
        for d in m.of(kind):
            if d["metadata"]["labels"].get("app.kubernetes.io/component") == component:
                return d
    return None


# ---- generic structure ---------------------------------------------------------------------------

def check_structure(m, ns, values):
    errs = []
    seen = set()
    dashboards_ns = values["dashboards"].get("namespace") or ns
    for d in m.docs:
        kind, md = d.get("kind"), d.get("metadata") or {}
        name = md.get("name")
        where = f"{kind}/{name}"
        if not d.get("apiVersion") or not kind or not name:
            errs.append(f"document without apiVersion/kind/metadata.name: {str(d)[:80]}")
            continue
        if API_VERSIONS.get(kind) != d["apiVersion"]:
            errs.append(f"{where}: apiVersion {d['apiVersion']}, want {API_VERSIONS.get(kind)}")
        if not NAME_RE.match(name) and not name.startswith("system:") or len(name) > 253:
            errs.append(f"{where}: invalid name")
        if kind in ("Service",) and len(name) > 63:
            errs.append(f"{where}: Service names must be <= 63 characters")
        if kind in NAMESPACED:
            want = ns
            if kind == "RoleBinding" and name.endswith("-authentication-reader"):
                want = "kube-system"
            if kind == "ConfigMap" and "-dashboard-" in name:
                want = dashboards_ns
            if md.get("namespace") != want:
                errs.append(f"{where}: namespace {md.get('namespace')!r}, want {want!r} (plain manifests must say it)")
        elif "namespace" in md:
            errs.append(f"{where}: cluster-scoped object with a namespace")
        key = (kind, md.get("namespace"), name)
        if key in seen:
            errs.append(f"{where}: defined twice")
        seen.add(key)
        for k, v in (md.get("labels") or {}).items():
            if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE_RE.match(v):
                errs.append(f"{where}: label {k}={v!r} is not a valid label value")
    for kind in ("Deployment", "DaemonSet"):
        for w in m.of(kind):
            errs += check_workload(m, w, ns)
    for s in m.of("Service"):
        errs += check_service(m, s)
    for p in m.of("PodDisruptionBudget"):
        sel = p["spec"]["selector"]["matchLabels"]
        targets = [w for w in m.of("Deployment") if selects(sel, w["spec"]["template"]["metadata"]["labels"])]
        if len(targets) != 1:
            errs.append(f"PodDisruptionBudget/{p['metadata']['name']}: selects {len(targets)} Deployments")
        elif p["spec"]["minAvailable"] >= targets[0]["spec"]["replicas"]:
            errs.append(f"PodDisruptionBudget/{p['metadata']['name']}: minAvailable >= replicas blocks every eviction")
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for b in m.of(kind):
            ref = b["roleRef"]
            if (ref["kind"], ref["name"]) not in SYSTEM_ROLES and not m.get(ref["kind"], ref["name"]):
                errs.append(f"{kind}/{b['metadata']['name']}: roleRef {ref['kind']}/{ref['name']} is not rendered")
            for s in b.get("subjects", []):
                if s["kind"] == "ServiceAccount" and not m.get("ServiceAccount", s["name"], s["namespace"]):
                    errs.append(f"{kind}/{b['metadata']['name']}: subject ServiceAccount {s['namespace']}/{s['name']} is not rendered")
    return errs


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_workload(m, w, ns):
    errs = []
    where = f"{w['kind']}/{w['metadata']['name']}"
    tmpl = w["spec"]["template"]
    if not selects(w["spec"]["selector"]["matchLabels"], tmpl["metadata"]["labels"]):
        errs.append(f"{where}: selector does not match the pod template labels")
    spec = tmpl["spec"]
    sa = spec.get("serviceAccountName")
    if not sa or not m.get("ServiceAccount", sa, ns):
        errs.append(f"{where}: serviceAccountName {sa!r} is not rendered")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec["containers"]:
        cw = f"{where} container {c.get('name')}"
        image = c.get("image", "")
        if not re.match(r"^[a-z0-9.\-/:]+:[A-Za-z0-9_][A-Za-z0-9_.\-]*$", image.split("@")[0]) or image.endswith(":"):
            errs.append(f"{cw}: image {image!r} has no tag")
        if not c.get("command"):
            errs.append(f"{cw}: no command")
        if not c.get("resources", {}).get("requests"):
            errs.append(f"{cw}: no resource requests")
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        for probe in ("livenessProbe", "readinessProbe"):
            port = (c.get(probe) or {}).get("httpGet", {}).get("port")
            if port is not None and port not in ports and port not in ports.values():
                errs.append(f"{cw}: {probe} port {port!r} is not a container port")
        for vm in c.get("volumeMounts", []):
            v = volumes.get(vm["name"])
            if v is None:
                errs.append(f"{cw}: volumeMount {vm['name']} has no volume")
                continue
            if "configMap" in v:
                cm = m.get("ConfigMap", v["configMap"]["name"], ns)
                if not cm:
                    errs.append(f"{cw}: ConfigMap {v['configMap']['name']} is not rendered")
                elif vm.get("subPath") and vm["subPath"] not in cm.get("data", {}):
                    errs.append(f"{cw}: ConfigMap {cm['metadata']['name']} has no key {vm['subPath']}")
            if "secret" in v:
                name = v["secret"]["secretName"]
                issued = any(c2["spec"].get("secretName") == name for c2 in m.of("Certificate"))
                if not m.get("Secret", name, ns) and not issued:
                    errs.append(f"{cw}: Secret {name} is neither rendered nor issued by a Certificate")
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False and not sc.get("privileged"):
            errs.append(f"{cw}: allowPrivilegeEscalation must be false")
        # The agent's root filesystem stays writable: the NVIDIA runtime hook runs ldconfig in it.
        if sc.get("readOnlyRootFilesystem") is not True and c.get("name") != "agent":
            errs.append(f"{cw}: readOnlyRootFilesystem must be true")
    return errs


def check_service(m, s):
    errs = []
    where = f"Service/{s['metadata']['name']}"
    targets = [w for k in ("Deployment", "DaemonSet") for w in m.of(k)
               if selects(s["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])]
    if len(targets) != 1:
        return [f"{where}: selects {len(targets)} workloads, want 1"]
    names = {p["name"] for c in pod_spec(targets[0])["containers"] for p in c.get("ports", [])}
    for p in s["spec"]["ports"]:
        if p["targetPort"] not in names:
            errs.append(f"{where}: targetPort {p['targetPort']} is not a port of {targets[0]['metadata']['name']}")
    return errs


# ---- the second scheduler -------------------------------------------------------------------------

def parse_duration(s):
    total, pos = 0.0, 0
    for m in re.finditer(r"([0-9.]+)(ms|s|m|h)", s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and s else None


def scheduler_config(m, ns):
    dep = workload_of(m, "scheduler")
    ks = container(dep, "kube-scheduler")
    config_path = next((a.split("=", 1)[1] for a in ks["command"] if a.startswith("--config=")), None)
    assert config_path, "kube-scheduler has no --config"
    mount = next(vm for vm in ks["volumeMounts"] if config_path.startswith(vm["mountPath"] + "/"))
    volume = next(v for v in pod_spec(dep)["volumes"] if v["name"] == mount["name"])
    cm = m.get("ConfigMap", volume["configMap"]["name"], ns)
    key = config_path[len(mount["mountPath"]) + 1:]
    return dep, yaml.safe_load(cm["data"][key]), cm


def check_scheduler(m, ns, values):
    errs = []
    dep, cfg, cm = scheduler_config(m, ns)
    name = values["schedulerName"]
    if cfg.get("apiVersion") != "kubescheduler.config.k8s.io/v1" or cfg.get("kind") != "KubeSchedulerConfiguration":
        errs.append("scheduler config: not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
    for k in set(cfg) - KSC_KEYS:
        errs.append(f"scheduler config: unknown key {k} (kube-scheduler's strict decoder refuses it)")
    le = cfg.get("leaderElection", {})
    for k in set(le) - LEADER_KEYS:
        errs.append(f"scheduler config: unknown leaderElection key {k}")
    if le.get("resourceName") != name or le.get("resourceName") == "kube-scheduler":
        errs.append(f"scheduler config: lease {le.get('resourceName')!r} must be the scheduler's own ({name})")
    if le.get("resourceNamespace") != ns:
        errs.append(f"scheduler config: lease namespace {le.get('resourceNamespace')!r}, want {ns}")
    ld, rd, rp = (parse_duration(le.get(k, "")) for k in ("leaseDuration", "renewDeadline", "retryPeriod"))
    if None in (ld, rd, rp) or not (ld > rd > 1.2 * rp):
        errs.append("scheduler config: need leaseDuration > renewDeadline > 1.2 x retryPeriod")
    if cfg.get("percentageOfNodesToScore") != 100:
        errs.append("scheduler config: percentageOfNodesToScore must be 100 (else the extender sees a sample of nodes)")
    profiles = cfg.get("profiles", [])
    if [p.get("schedulerName") for p in profiles] != [name]:
        errs.append(f"scheduler config: profiles {profiles}, want one named {name}")
    for p in profiles:
        for k in set(p) - PROFILE_KEYS:
            errs.append(f"scheduler config: unknown profile key {k}")
    exts = cfg.get("extenders", [])
    if len(exts) != 1:
        return errs + [f"scheduler config: {len(exts)} extenders, want 1"]
    ext = exts[0]
    for k in set(ext) - EXTENDER_KEYS:
        errs.append(f"scheduler config: unknown extender key {k} (e.g. enableHttps must be enableHTTPS)")
    ev = values["scheduler"]["extender"]
    expect = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
              "nodeCacheCapable": True, "ignorable": ev["ignorable"], "weight": ev["weight"],
              "enableHTTPS": False}
    if ev["preempt"]:
        expect["preemptVerb"] = "preempt"
    elif "preemptVerb" in ext:
        errs.append("scheduler config: preemptVerb set although scheduler.extender.preempt is false")
    for k, v in expect.items():
        if ext.get(k) != v:
            errs.append(f"scheduler config: extender {k}={ext.get(k)!r}, want {v!r}")
    for k, route in EXTENDER_ROUTES.items():
        if k in ext and ext[k] != route:
            errs.append(f"scheduler config: {k}={ext[k]!r} does not name the extender route {route}")
    if not isinstance(ext.get("weight"), int) or ext["weight"] <= 0:
        errs.append("scheduler config: weight must be a positive integer when prioritizeVerb is set")
    t = parse_duration(str(ext.get("httpTimeout", "")))
    if t is None or not (0 < t <= 30):
        errs.append(f"scheduler config: httpTimeout {ext.get('httpTimeout')!r} is not a duration in (0, 30s]")
    managed = ext.get("managedResources", [])
    for r in managed:
        for k in set(r) - MANAGED_KEYS:
            errs.append(f"scheduler config: unknown managedResources key {k}")
        if r.get("ignoredByScheduler") is not True:
            errs.append(f"scheduler config: {r.get('name')} must be ignoredByScheduler (the extender does the accounting)")
    if {r.get("name") for r in managed} != GPUPACK_RESOURCES:
        errs.append(f"scheduler config: managedResources {managed}, want {sorted(GPUPACK_RESOURCES)}")

    # urlPrefix must reach the extender sidecar: loopback, its --listen port, its config's prefix.
    url = re.match(r"^http://127\.0\.0\.1:(\d+)(/[^?#]*)?$", ext.get("urlPrefix", ""))
    extc = container(dep, "extender")
    listen = arg_after(extc["command"], "--listen") or ""
    ext_cfg = yaml.safe_load(cm["data"]["extender.yaml"]) or {}
    if not url:
        errs.append(f"scheduler config: urlPrefix {ext.get('urlPrefix')!r} is not http://127.0.0.1:PORT/PREFIX")
    else:
        if listen != f"127.0.0.1:{url.group(1)}":
            errs.append(f"scheduler config: urlPrefix port {url.group(1)} but the extender listens on {listen!r}")
        if (url.group(2) or "").rstrip("/") != str(ext_cfg.get("prefix", "")).rstrip("/"):
            errs.append(f"scheduler config: urlPrefix path {url.group(2)!r} but extender.yaml prefix is {ext_cfg.get('prefix')!r}")
    metrics_port = {p["name"]: p["containerPort"] for p in extc.get("ports", [])}.get("metrics")
    if str(ext_cfg.get("metricsListen", "")) != f"0.0.0.0:{metrics_port}":
        errs.append(f"extender.yaml metricsListen {ext_cfg.get('metricsListen')!r} is not the metrics port {metrics_port} on all interfaces")
    if arg_after(extc["command"], "--config") != "/etc/gpupack/extender.yaml":
        errs.append("extender: --config is not the mounted /etc/gpupack/extender.yaml")
    # A filter shed after kube-scheduler stopped listening would be no faster than a timeout.
    if "maxQueueWait" in ext_cfg:
        wait = parse_duration(str(ext_cfg["maxQueueWait"]))
        if wait is None or (t is not None and wait >= t):
            errs.append(f"extender.yaml maxQueueWait {ext_cfg['maxQueueWait']!r} is not a duration below httpTimeout {ext.get('httpTimeout')!r}")
    annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
    if not re.fullmatch(r"[0-9a-f]{64}", annotations.get("checksum/config", "")):
        errs.append("scheduler Deployment: no checksum/config annotation (config changes would not roll the pods)")
    pdb = [p for p in m.of("PodDisruptionBudget") if "scheduler" in p["metadata"]["name"]]
    if (values["scheduler"]["replicas"] > 1) != bool(pdb):
        errs.append(f"scheduler: {len(pdb)} PDBs with {values['scheduler']['replicas']} replicas (want one iff > 1)")
    return errs


# ---- RBAC -----------------------------------------------------------------------------------------

def rules_for(m, sa, ns):
    """[(rule, namespace or None)] granted to ServiceAccount ns/sa by rendered roles (system roles
    are listed by name in the result's second element)."""
    granted, system = [], []
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for b in m.of(kind):
            if not any(s["kind"] == "ServiceAccount" and s["name"] == sa and s["namespace"] == ns
                       for s in b.get("subjects", [])):
                continue
            ref = b["roleRef"]
            role = m.get(ref["kind"], ref["name"])
            if role is None:
                system.append((ref["kind"], ref["name"], b["metadata"].get("namespace")))
                continue
            scope = b["metadata"].get("namespace") if kind == "RoleBinding" else None
            for r in role.get("rules", []):
                granted.append((r, scope))
    return granted, system


def allows(granted, call):
    group, resource, verb, ns, name = call
    for r, scope in granted:
        if scope is not None and scope != ns:
            continue
        if group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r.get("verbs", []):
            if not r.get("resourceNames") or (name is not None and name in r["resourceNames"]):
                return True
    return False


def check_rbac(m, ns, values):
    errs = []
    for r in m.of("ClusterRole") + m.of("Role"):
        for rule in r.get("rules", []):
            for field in ("apiGroups", "resources", "verbs"):
                if "*" in rule.get(field, []):
                    errs.append(f"{r['kind']}/{r['metadata']['name']}: wildcard in {field}")
            if "secrets" in rule.get("resources", []):
                errs.append(f"{r['kind']}/{r['metadata']['name']}: grants secrets")
    components = []
    sched = workload_of(m, "scheduler")
    ext = values["scheduler"]["extender"]
    defrag_mode = (ext.get("config") or {}).get("defragmentation", {}).get("mode", ext["defragmentation"])
    components.append(("scheduler", sched, extender_calls(ns, values["schedulerName"], defrag_mode == "on"),
                       {("ClusterRole", "system:kube-scheduler", None), ("ClusterRole", "system:volume-scheduler", None),
                        ("Role", "extension-apiserver-authentication-reader", "kube-system")}))
    agent = workload_of(m, "agent")
    if values["agent"]["enabled"]:
        if agent is None:
            errs.append("agent enabled but no DaemonSet")
        else:
            components.append(("agent", agent, agent_calls(values["agent"]["foreignPodEviction"]["enabled"]), set()))
    webhook = workload_of(m, "webhook")
    if values["webhook"]["enabled"]:
        components.append(("webhook", webhook, [], set()))
        if pod_spec(webhook).get("automountServiceAccountToken") is not False:
            errs.append("webhook: makes no API calls, so automountServiceAccountToken must be false")
    for comp, w, calls, want_system in components:
        sa = pod_spec(w)["serviceAccountName"]
        granted, system = rules_for(m, sa, ns)
        for call in calls:
            if not allows(granted, call):
                errs.append(f"{comp}: RBAC does not allow {call[2]} {call[1]} (group {call[0]!r}, ns {call[3]}, name {call[4]})")
        if set(system) != want_system:
            errs.append(f"{comp}: bound to system roles {sorted(map(str, system))}, want {sorted(map(str, want_system))}")
        # Least privilege: every granted (group, resource, verb) is one the binary needs.
        needed = {(c[0], c[1], c[2]) for c in calls}
        for r, scope in granted:
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for verb in r.get("verbs", []):
                        if (g, res, verb) not in needed:
                            errs.append(f"{comp}: grants {verb} {res} (group {g!r}) that it never calls")
    return errs


# kube::Client calls → the (group, resource, verb) they need (kube/client.h and client.cc).
CLIENT_METHOD_CALLS = {
    "GetPod": [("", "pods", "get")],
    "CreateBinding": [("", "pods/binding", "create")],
    "EvictPod": [("", "pods/eviction", "create")],
    "CreateEvent": [("", "events", "create")],
    "GetNode": [("", "nodes", "get")],
    "PatchNodeStatus": [("", "nodes/status", "patch")],
    "GetGpuNode": [("gpupack.io", "gpunodes", "get")],
    "UpsertGpuNodeStatus": [("gpupack.io", "gpunodes", "get"), ("gpupack.io", "gpunodes", "create"),
                            ("gpupack.io", "gpunodes/status", "update")],
}
GENERIC_VERBS = {"Get": ["get"], "List": ["list"], "Create": ["create"], "Update": ["update"],
                 "Patch": ["patch"], "Delete": ["delete"], "Watch": ["watch"]}
RESOURCE_FUNCS = {"PodsResource": ("", "pods"), "NodesResource": ("", "nodes"), "EventsResource": ("", "events"),
                  "LeasesResource": ("coordination.k8s.io", "leases"), "GpuNodesResource": ("gpupack.io", "gpunodes")}
COMPONENT_SOURCES = {"extender": ["scheduler/cluster", "scheduler/extender", "cmd/extender"],
                     "agent": ["agent", "cmd/agent"]}


def calls_in_sources(source_root, dirs):
    """(group, resource, verb) of every kube client call in the component's sources (tests excluded)."""
    found = set()
    for d in dirs:
        for path in glob.glob(os.path.join(source_root, d, "*.cc")):
            if path.endswith("_test.cc"):
                continue
            with open(path, errors="replace") as f:
                text = f.read()
            for method, needs in CLIENT_METHOD_CALLS.items():
                if re.search(r"(->|\.)" + method + r"\(", text):
                    found.update(needs)
            for m in re.finditer(r"(->|\.)(Get|List|Create|Update|Patch|Delete|Watch)\(\s*kube::(\w+)\(\)", text):
                group, res = RESOURCE_FUNCS[m.group(3)]
                sub = ""
                tail = text[m.end():m.end() + 200].split(";")[0]
                if m.group(2) in ("Update", "Patch") and '"status"' in tail:
                    sub = "/status"
                found.update((group, res + sub, v) for v in GENERIC_VERBS[m.group(2)])
            for m in re.finditer(r"\bInformer\b[^;]{0,120}?kube::(\w+Resource)\(\)", text):
                group, res = RESOURCE_FUNCS[m.group(1)]
                found.update({(group, res, "list"), (group, res, "watch")})
    return found


def check_calls_in_code(source_root, ns, scheduler_name):
    """The kube client calls each binary's code makes are in its permission table above (which
    the rendered RBAC must grant): a new call in the code without a chart permission fails."""
    errs = []
    tables = {"extender": extender_calls(ns, scheduler_name), "agent": AGENT_CALLS}
    for component, dirs in COMPONENT_SOURCES.items():
        table = {(c[0], c[1], c[2]) for c in tables[component]}
        found = calls_in_sources(source_root, dirs)
        if not found:
            errs.append(f"{component}: no kube client calls found in {dirs} (did the code move?)")
        for group, res, verb in sorted(found - table):
            errs.append(f"{component} code calls {verb} {res} (group {group!r}) but the chart does not grant it")
        # And the reverse, so a permission the code stopped using is dropped (leases excepted:
        # kube-scheduler in the same pod needs them whatever the extender does).
        for group, res, verb in sorted(table - found):
            if found and res != "leases":
                errs.append(f"the chart grants {component} {verb} {res} (group {group!r}), which its code never calls")
    return errs


def check_client_resources(source_root, ns, scheduler_name):
    """Every resource type the kube client can address (kube/client.cc) is one some component's
    RBAC table above lists: a new resource in the client without a chart permission fails here."""
    errs = []
    known = {(c[0], c[1].split("/")[0]) for c in extender_calls(ns, scheduler_name) + AGENT_CALLS}
    found = set()
    for path in glob.glob(os.path.join(source_root, "kube", "*.cc")):
        if path.endswith("_test.cc"):
            continue  # a test may address what the test API server serves, which no component calls
        with open(path) as f:
            text = f.read()
        for group, plural in re.findall(r'Resource\s+\w+\s*\{\s*"([^"]*)"\s*,\s*"[^"]*"\s*,\s*"([^"]+)"', text):
            found.add((group, plural))
    if not found:
        return [f"no Resource definitions found under {source_root}/kube (did the client move?)"]
    for group, plural in sorted(found - known):
        errs.append(f"kube client addresses {plural} (group {group!r}), which no component's RBAC covers")
    return errs


# ---- webhook ----------------------------------------------------------------------------------------

def openssl(*args, stdin=None):
    p = subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check_webhook(m, ns, values):
    if not values["webhook"]["enabled"]:
        return [f"webhook disabled but {k} rendered" for k in ("MutatingWebhookConfiguration",) if m.of(k)]
    errs = []
    mwcs = m.of("MutatingWebhookConfiguration")
    if len(mwcs) != 1 or len(mwcs[0]["webhooks"]) != 1:
        return ["want exactly one MutatingWebhookConfiguration with one webhook"]
    mwc, hook = mwcs[0], mwcs[0]["webhooks"][0]
    wv = values["webhook"]
    for k, v in {"sideEffects": "None", "failurePolicy": wv["failurePolicy"], "matchPolicy": "Equivalent",
                 "timeoutSeconds": wv["timeoutSeconds"]}.items():
        if hook.get(k) != v:
            errs.append(f"webhook: {k}={hook.get(k)!r}, want {v!r}")
    if "v1" not in hook.get("admissionReviewVersions", []):
        errs.append("webhook: admissionReviewVersions must include v1")
    # Every pod CREATE and every ephemeral container added later: no pod may choose GPU devices
    # itself (docs/security.md), so nothing but the namespace may exempt one.
    rules = hook.get("rules", [])
    want_rules = [{"operations": [op], "apiGroups": [""], "apiVersions": ["v1"], "resources": [res], "scope": "Namespaced"}
                  for op, res in (("CREATE", "pods"), ("UPDATE", "pods/ephemeralcontainers"))]
    if rules != want_rules:
        errs.append(f"webhook: rules {rules}, want pod CREATE and pods/ephemeralcontainers UPDATE only")
    if "objectSelector" in hook:
        errs.append("webhook: an objectSelector lets a pod's own labels exempt it from the review")
    svc_ref = hook["clientConfig"]["service"]
    if svc_ref.get("path") != "/mutate":
        errs.append(f"webhook: path {svc_ref.get('path')!r}, want /mutate")
    svc = m.get("Service", svc_ref["name"], svc_ref["namespace"])
    dep = workload_of(m, "webhook")
    c = container(dep, "webhook")
    if svc is None:
        errs.append(f"webhook: Service {svc_ref['name']} is not rendered")
    else:
        port = next((p for p in svc["spec"]["ports"] if p["port"] == svc_ref.get("port", 443)), None)
        cport = {p["name"]: p["containerPort"] for p in c["ports"]}.get(port["targetPort"]) if port else None
        listen = arg_after(c["command"], "--listen") or ""
        if cport is None or not listen.endswith(f":{cport}"):
            errs.append(f"webhook: Service port {svc_ref.get('port')} does not reach --listen {listen!r}")
    exprs = hook.get("namespaceSelector", {}).get("matchExpressions", [])
    excluded = {v for e in exprs if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn" for v in e["values"]}
    if not {"kube-system", ns, *wv.get("exemptNamespaces", [])} <= excluded:
        errs.append(f"webhook: namespaceSelector excludes {sorted(excluded)}, want kube-system and {ns}")
    cm_name = next(v["configMap"]["name"] for v in pod_spec(dep)["volumes"] if "configMap" in v)
    wcfg = yaml.safe_load(m.get("ConfigMap", cm_name, ns)["data"]["webhook.yaml"])
    for k in set(wcfg) - WEBHOOK_CONFIG_KEYS:
        errs.append(f"webhook config: unknown key {k}")
    if wcfg.get("schedulerName") != values["schedulerName"] or wcfg.get("failurePolicy") != wv["failurePolicy"]:
        errs.append("webhook config: schedulerName/failurePolicy differ from the chart's")
    secret_name = next(v["secret"]["secretName"] for v in pod_spec(dep)["volumes"] if "secret" in v)
    dns = f"{svc_ref['name']}.{ns}.svc"
    if wv["certs"]["mode"] == "certManager":
        cert = next((x for x in m.of("Certificate") if x["spec"]["secretName"] == secret_name), None)
        if cert is None:
            errs.append("webhook: no cert-manager Certificate for the TLS Secret")
        else:
            inject = mwc["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
            if inject != f"{ns}/{cert['metadata']['name']}":
                errs.append(f"webhook: inject-ca-from {inject!r} does not name the Certificate")
            if dns not in cert["spec"]["dnsNames"]:
                errs.append(f"webhook: Certificate lacks dnsName {dns}")
            if not m.get("Issuer", cert["spec"]["issuerRef"]["name"], ns):
                errs.append("webhook: the Certificate's Issuer is not rendered")
    else:
        secret = m.get("Secret", secret_name, ns)
        with tempfile.TemporaryDirectory() as tmp:
            ca, crt, key = (os.path.join(tmp, f) for f in ("ca.pem", "tls.pem", "key.pem"))
            for path, data in ((ca, hook["clientConfig"].get("caBundle", "")), (crt, secret["data"]["tls.crt"]),
                               (key, secret["data"]["tls.key"])):
                with open(path, "wb") as f:
                    f.write(base64.b64decode(data))
            if secret["data"]["ca.crt"] != hook["clientConfig"].get("caBundle"):
                errs.append("webhook: caBundle differs from the Secret's ca.crt")
            rc, out = openssl("verify", "-CAfile", ca, crt)
            if rc != 0:
                errs.append(f"webhook: serving certificate not signed by caBundle: {out.strip()}")
            rc, out = openssl("x509", "-in", crt, "-noout", "-ext", "subjectAltName")
            if f"DNS:{dns}" not in out:
                errs.append(f"webhook: serving certificate lacks DNS:{dns}: {out.strip()}")
            rc1, pub1 = openssl("x509", "-in", crt, "-noout", "-pubkey")
            rc2, pub2 = openssl("pkey", "-in", key, "-pubout")
            if rc1 or rc2 or pub1.strip() != pub2.strip():
                errs.append("webhook: tls.key does not match tls.crt")
    pdb = [p for p in m.of("PodDisruptionBudget") if "webhook" in p["metadata"]["name"]]
    if (wv["replicas"] > 1) != bool(pdb):
        errs.append("webhook: want a PDB iff replicas > 1")
    return errs


# ---- agent --------------------------------------------------------------------------------------------

def check_agent(m, values):
    av = values["agent"]
    ds = workload_of(m, "agent")
    if not av["enabled"]:
        return ["agent disabled but a DaemonSet rendered"] if ds else []
    errs = []
    spec = pod_spec(ds)
    c = container(ds, "agent")
    if spec.get("hostPID") is not True:
        errs.append("agent: hostPID is needed to map NVML's host PIDs to pods")
    if spec.get("hostNetwork") or spec.get("hostIPC"):
        errs.append("agent: hostNetwork/hostIPC are not needed")
    allowed = {"/sys/fs/cgroup"} | ({"/dev", av["driverLibraryPath"]} if not av["runtimeClassName"] else set())
    if av["nri"]["enabled"]:
        allowed.add(os.path.dirname(av["nri"]["socket"]))
    if av["mps"]["pipeDirectory"]:
        allowed.add(av["mps"]["pipeDirectory"])
    if av["mps"]["server"]:
        allowed.add(av["mps"]["controlBinary"])
    allowed |= set(av["cdiSpecDirs"])
    for v in spec.get("volumes", []):
        if "hostPath" in v and v["hostPath"]["path"] not in allowed:
            errs.append(f"agent: hostPath {v['hostPath']['path']} is more host access than NVML and cgroups need")
    sc = c.get("securityContext", {})
    if av["runtimeClassName"]:
        if spec.get("runtimeClassName") != av["runtimeClassName"] or sc.get("privileged"):
            errs.append("agent: with a runtime class the pod must use it and not be privileged")
        if sc.get("capabilities", {}).get("drop") != ["ALL"] or set(sc.get("capabilities", {}).get("add", [])) - {"SYS_ADMIN"}:
            errs.append(f"agent: capabilities {sc.get('capabilities')}, want drop ALL, add at most SYS_ADMIN")
    cmd = c["command"]
    if cmd[0] != "gpupack-agent" or arg_after(cmd, "--node-name") != "$(NODE_NAME)" or arg_after(cmd, "--backend") != av["backend"]:
        errs.append(f"agent: command {cmd} lacks --node-name $(NODE_NAME) --backend {av['backend']}")
    eviction = av["foreignPodEviction"]
    if ("--evict-foreign-pods" in cmd) != eviction["enabled"]:
        errs.append(f"agent: --evict-foreign-pods in the command must follow foreignPodEviction.enabled={eviction['enabled']}")
    if eviction["enabled"] and arg_after(cmd, "--foreign-eviction-interval") != eviction["interval"]:
        errs.append(f"agent: --foreign-eviction-interval must be foreignPodEviction.interval {eviction['interval']}")
    errs += check_agent_mps(spec, c, av)
    errs += check_agent_doctor_paths(c, av)
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        errs.append("agent: NODE_NAME must come from the downward API (spec.nodeName)")
    errs += check_agent_nri(spec, values)
    if not spec.get("nodeSelector") and not spec.get("affinity"):
        errs.append("agent: no nodeSelector/affinity: it would run on every node")
    if not any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])) and av["tolerations"]:
        errs.append("agent: GPU taint not tolerated")
    return errs


def check_agent_mps(spec, c, av):
    """agent.mps.pipeDirectory reaches the agent (read-only, at the host's path) and gpupack-nri, or
    neither; with agent.mps.server (MPS v3) so do the server and its CLI, which both mount
    read-only (the CLI talks to the daemon through the pipe directory), and gpupack-nri caps
    default."""
    mps = av["mps"]
    pipe, server = mps["pipeDirectory"], mps["server"]
    errs = []
    mounts = {vm["mountPath"]: vm for vm in c.get("volumeMounts", [])}
    if pipe and not mounts.get(pipe, {}).get("readOnly"):
        errs.append(f"agent: the MPS pipe directory {pipe} must be mounted read-only at its host path")
    want = {"--mps-pipe-directory": pipe or None, "--mps-server": server or None,
            "--mps-control-binary": mps["controlBinary"] if server else None}
    nc = next((x for x in spec["containers"] if x["name"] == "nri"), None)
    for name, container_spec in [("agent", c)] + ([("nri", nc)] if nc else []):
        for flag, value in want.items():
            if arg_after(container_spec["command"], flag) != value:
                errs.append(f"agent: {name} {flag} must be {value!r} (agent.mps)")
        ro = {vm["mountPath"] for vm in container_spec.get("volumeMounts", []) if vm.get("readOnly")}
        for path in (pipe, mps["controlBinary"]) if server else ():
            if path not in ro:
                errs.append(f"agent: {name} must mount {path} read-only at its host path (agent.mps.server)")
    if nc and server and arg_after(nc["command"], "--mps-default-namespace-percentage") != str(
            mps["defaultNamespacePercentage"]):
        errs.append("agent: nri --mps-default-namespace-percentage must be agent.mps.defaultNamespacePercentage")
    return errs


def check_agent_doctor_paths(c, av):
    """The doctor in the agent's pod reads what the host has: every CDI spec directory and, with
    node-side injection, the NRI socket's directory are mounted read-only at their host paths and
    named in the agent's flags."""
    errs = []
    cmd = c["command"]
    mounts = {vm["mountPath"]: vm for vm in c.get("volumeMounts", [])}
    if arg_after(cmd, "--cdi-spec-dirs") != ",".join(av["cdiSpecDirs"]):
        errs.append(f"agent: --cdi-spec-dirs must be agent.cdiSpecDirs {av['cdiSpecDirs']}")
    wanted = list(av["cdiSpecDirs"])
    nri = av["nri"]
    if nri["enabled"]:
        wanted.append(os.path.dirname(nri["socket"]))
        if arg_after(cmd, "--nri-socket") != nri["socket"]:
            errs.append(f"agent: --nri-socket must be agent.nri.socket {nri['socket']}")
    elif "--nri-socket" in cmd:
        errs.append("agent: --nri-socket without agent.nri.enabled")
    for path in wanted:
        if not mounts.get(path, {}).get("readOnly"):
            errs.append(f"agent: {path} must be mounted read-only at its host path for the doctor")
    return errs


def check_agent_nri(spec, values):
    """The gpupack-nri container follows agent.nri: its socket mounted, every namespace the webhook
    leaves alone left alone by the plugin too, readiness on its registration."""
    nri = values["agent"]["nri"]
    nc = next((c for c in spec["containers"] if c["name"] == "nri"), None)
    if nc is None:
        return ["agent: agent.nri.enabled but no nri container"] if nri["enabled"] else []
    if not nri["enabled"]:
        return ["agent: an nri container without agent.nri.enabled"]
    errs = []
    cmd = nc["command"]
    if cmd[0] != "gpupack-nri" or arg_after(cmd, "--socket") != nri["socket"] or arg_after(cmd, "--index") != nri["index"]:
        errs.append(f"agent: nri command {cmd} lacks --socket {nri['socket']} --index {nri['index']}")
    exempt = {cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--exempt-namespace"}
    want = {"kube-system", NAMESPACE} | set(values["webhook"]["exemptNamespaces"]) | set(nri["exemptNamespaces"])
    if exempt != want:
        errs.append(f"agent: nri exempts {sorted(exempt)}, want {sorted(want)} (the webhook's, the release's, kube-system)")
    if os.path.dirname(nri["socket"]) not in {vm["mountPath"] for vm in nc.get("volumeMounts", [])}:
        errs.append(f"agent: nri does not mount the socket's directory {os.path.dirname(nri['socket'])}")
    if nc.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
        errs.append("agent: nri must be ready only while registered (/readyz)")
    return errs


# ---- CRD -----------------------------------------------------------------------------------------------

SAMPLE_STATUS = {  # the shape api/gpunode.h documents
    "devices": [{"uuid": "GPU-1", "index": 0, "model": "NVIDIA H100 80GB HBM3", "memoryMiB": 81559,
                 "usedMiB": 1200, "allocatedMiB": 16384, "healthy": True, "migEnabled": False,
                 "computeEnforcement": "mps-client", "allocatedComputePct": 40, "smUtilPct": 35,
                 "migInstances": [{"uuid": "MIG-1", "profile": "3g.40gb", "memoryMiB": 40192, "usedMiB": 0,
                                   "gpuInstanceId": 1, "placement": {"start": 0, "size": 4},
                                   "computeEnforcement": "none"}]}],
    "processes": [{"pid": 4242, "device": "GPU-1", "usedMiB": 900, "smUtilPct": 30, "podUID": "u",
                   "pod": "ns/name", "container": "main", "containerID": "c"}],
    "enforcement": {"mode": "cgroup-dmem", "driverVersion": "615.20", "cudaVersion": "13.4", "reason": "",
                    "computeReason": "m"},
    "audit": [{"kind": "over-cap", "device": "GPU-1", "podUID": "u", "pod": "ns/name", "container": "main",
               "pid": 4242, "usedMiB": 9000, "capMiB": 8192, "message": "m"},
              {"kind": "over-compute", "device": "GPU-1", "podUID": "u", "pod": "ns/name", "container": "main",
               "pid": 4242, "usedMiB": 900, "capMiB": 8192, "usedComputePct": 55, "computePct": 30,
               "message": "m"}],
    "gpus": 1, "memoryMiB": 81559, "allocatedMiB": 16384, "usedMiB": 1200, "maxPodsPerDevice": 16,
    "heartbeatTime": "2026-11-29T10:18:41Z",
    "conditions": [{"type": "MemoryEnforced", "status": "True", "reason": "Enforced", "message": "m",
                    "lastTransitionTime": "2026-11-29T10:00:02Z"}],
}


def openapi_errors(schema, value, at):
    """Type errors, and fields the API server would prune (not declared in the schema)."""
    t = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}
    if t and not isinstance(value, types[t]) or (t in ("integer", "number") and isinstance(value, bool)):
        return [f"{at}: {value!r} is not {t}"]
    errs = []
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{at}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict) and t == "object" and "properties" in schema:
        for k, v in value.items():
            if k not in schema["properties"]:
                errs.append(f"{at}.{k}: not declared in the CRD (the API server would prune it)")
            else:
                errs += openapi_errors(schema["properties"][k], v, f"{at}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errs += openapi_errors(schema["items"], v, f"{at}[{i}]")
    return errs


def check_crd(m, values, agent_status=None):
    crds = m.of("CustomResourceDefinition")
    if not values["crd"]["install"]:
        return ["crd.install=false but a CRD rendered"] if crds else []
    if len(crds) != 1:
        return [f"{len(crds)} CRDs rendered, want 1"]
    crd, errs = crds[0], []
    spec = crd["spec"]
    if crd["metadata"]["name"] != "gpunodes.gpupack.io" or spec["group"] != "gpupack.io" or spec["scope"] != "Cluster":
        errs.append("CRD: want gpunodes.gpupack.io, cluster-scoped")
    if spec["names"].get("kind") != "GPUNode" or spec["names"].get("plural") != "gpunodes":
        errs.append("CRD: names must be GPUNode / gpunodes")
    versions = spec["versions"]
    if [(v["name"], v["served"], v["storage"]) for v in versions] != [("v1alpha1", True, True)]:
        errs.append("CRD: want one served storage version v1alpha1")
    v = versions[0]
    if v.get("subresources", {}).get("status") != {}:
        errs.append("CRD: needs the status subresource (the agent writes only status)")
    schema = v["schema"]["openAPIV3Schema"]
    status_schema = schema["properties"]["status"]
    cols = {c["name"]: c for c in v.get("additionalPrinterColumns", [])}
    for want in ("GPUs", "Memory MiB", "Allocated MiB", "Used MiB", "Enforcement", "Memory Enforced",
                 "Compute Enforced", "Heartbeat"):
        if want not in cols:
            errs.append(f"CRD: printer column {want} missing")
    if cols.get("Heartbeat", {}).get("type") != "date":
        errs.append("CRD: Heartbeat column must be type date (kubectl shows its age)")
    for c in cols.values():
        node = schema
        # A condition's column, .status.conditions[?(@.type=="X")].status: the item's field.
        path = re.sub(r'\[\?\(@\.type=="[A-Za-z]+"\)\]', ".items", c["jsonPath"])
        for part in path.lstrip(".").split("."):
            if part == "items" and "items" in node:
                node = node["items"]
                continue
            node = node.get("properties", {}).get(part)
            if node is None:
                errs.append(f"CRD: printer column {c['name']} path {c['jsonPath']} is not in the schema")
                break
    errs += openapi_errors(status_schema, SAMPLE_STATUS, "sample status")
    if agent_status is not None:
        errs += openapi_errors(status_schema, agent_status, "gpupack-agent --once --print status")
    return errs


# ---- values.schema.json ---------------------------------------------------------------------------------

def check_schema_coverage(chart_dir):
    schema = chartlib.read_json(os.path.join(chart_dir, "values.schema.json"))
    values = chartlib.merged_values(chart_dir)
    errs = []

    def resolve(s):
        while "$ref" in s:
            node = schema
            for part in s["$ref"][2:].split("/"):
                node = node[part]
            s = node
        return s

    def walk(v, s, at):
        s = resolve(s)
        if isinstance(v, dict):
            if s.get("type") == "object" and "properties" in s and s.get("additionalProperties") is not False \
                    and at != "":
                errs.append(f"values.schema.json: {at} must set additionalProperties: false (typos would pass)")
            for k, child in v.items():
                path = f"{at}.{k}" if at else k
                if k in s.get("properties", {}):
                    walk(child, s["properties"][k], path)
                elif isinstance(s.get("additionalProperties"), dict):
                    walk(child, s["additionalProperties"], path)
                elif "properties" in s or s.get("additionalProperties") is False:
                    errs.append(f"values.schema.json: {path} (in values.yaml) is not described")

    walk(values, schema, "")
    return errs


def check_chart_metadata(chart_dir):
    """What `helm lint` checks in Chart.yaml."""
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    errs = []
    if chart.get("apiVersion") != "v2":
        errs.append("Chart.yaml: apiVersion must be v2")
    if chart.get("name") != os.path.basename(os.path.normpath(chart_dir)):
        errs.append("Chart.yaml: name must equal the chart directory's name")
    if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?", str(chart.get("version", ""))):
        errs.append(f"Chart.yaml: version {chart.get('version')!r} is not SemVer 2")
    if not isinstance(chart.get("appVersion"), str):
        errs.append("Chart.yaml: appVersion must be a (quoted) string")
    if not re.fullmatch(r">=\s*1\.\d+\.\d+(-0)?", str(chart.get("kubeVersion", ""))):
        errs.append("Chart.yaml: kubeVersion must state the oldest supported Kubernetes (>=1.26.0-0)")
    if chart.get("type", "application") != "application" or not chart.get("description"):
        errs.append("Chart.yaml: an application chart with a description")
    return errs


def check_value_references(chart_dir):
    """Every .Values path a template reads (directly or through a `$x := .Values...` alias) exists
    in values.yaml: with missingkey=zero a typo would silently render as empty."""
    values = chartlib.merged_values(chart_dir)
    errs = []
    for path in sorted(glob.glob(os.path.join(chart_dir, "templates", "**", "*"), recursive=True)):
        if os.path.isdir(path):
            continue
        with open(path) as f:
            text = f.read()
        refs = [m.group(1) for m in re.finditer(r"\.Values((?:\.[A-Za-z_]\w*)+)", text)]
        for alias, base in re.findall(r"\$(\w+)\s*:=\s*\.Values((?:\.[A-Za-z_]\w*)+)", text):
            refs += [base + m.group(1) for m in re.finditer(r"\$" + alias + r"((?:\.[A-Za-z_]\w*)+)", text)]
        for ref in refs:
            node = values
            for part in ref.strip(".").split("."):
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, dict) and node == {}:
                    break  # a free-form map (podAnnotations, config): any key
                else:
                    errs.append(f"{os.path.relpath(path, chart_dir)}: .Values{ref} is not in values.yaml")
                    break
    return errs


def check_refusals(r):
    """Values the chart must refuse, with a message that names the problem."""
    errs = []
    cases = [
        (["scheduler.extender.wieght=5"], (), "wieght"),
        # helm's JSON-schema errors name the value by JSON pointer.
        (["webhook.certs.mode=selfsigned"], (), "/webhook/certs/mode"),
        (["schedulerName=default-scheduler"], (), "schedulerName"),
        (["scheduler.extender.httpTimeout=5"], (), "httpTimeout"),
        (["agent.foreignPodEviction.interval=500ms"], (), "/agent/foreignPodEviction/interval"),
        (["scheduler.kubeScheduler.image.tag=v1.31.0"], (), "newer than the cluster"),
        (["webhook.certs.mode=certManager"], (), "cert-manager"),
        (["prometheus.serviceMonitor.enabled=true"], (), "monitoring.coreos.com"),
        (["scheduler.replicas=2", "scheduler.podDisruptionBudget.minAvailable=2"], CI_API_VERSIONS, "minAvailable"),
        (["agent.mps.server=shared"], (), "agent.mps.server needs agent.mps.pipeDirectory"),
        (["agent.mps.server=shared", "agent.mps.pipeDirectory=/tmp/nvidia-mps"], (), "needs agent.nri.enabled"),
        (["agent.mps.defaultNamespacePercentage=101"], (), "/agent/mps/defaultNamespacePercentage"),
    ]
    cases.append(([], (), "kubeVersion", "v1.25.9"))  # Chart.yaml kubeVersion: >=1.26.0-0
    for sets, api, needle, *kube in cases:
        ok, _, err = r.render(sets=sets, api_versions=api, kube_version=(kube or [chartlib.KUBE_VERSION])[0])
        if ok:
            errs.append(f"render with {sets} succeeded; it must be refused")
        elif needle not in err:
            errs.append(f"render with {sets} failed without naming {needle!r}: {err.strip()[:300]}")
    return errs


def check_versions_and_checksum(r):
    errs = []
    docs, _ = r.render_docs(kube_version="v1.31.1+k3s1")
    image = container(workload_of(Manifests(docs), "scheduler"), "kube-scheduler")["image"]
    if image != "registry.k8s.io/kube-scheduler:v1.31.1":
        errs.append(f"kube-scheduler image on v1.31.1+k3s1 is {image}, want the cluster version v1.31.1")
    docs, _ = r.render_docs(kube_version="v1.30.8-eks-2d5f260", sets=["scheduler.kubeScheduler.image.tag=v1.29.4"])
    image = container(workload_of(Manifests(docs), "scheduler"), "kube-scheduler")["image"]
    if not image.endswith(":v1.29.4"):
        errs.append(f"explicit older kube-scheduler tag not used: {image}")

    def checksum(sets):
        d, _ = r.render_docs(sets=sets)
        return workload_of(Manifests(d), "scheduler")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    if checksum([]) != checksum([]):
        errs.append("checksum/config is not deterministic")
    if checksum([]) == checksum(["scheduler.extender.httpTimeout=4s"]):
        errs.append("checksum/config does not change with the scheduler config")
    return errs


def check_webhook_cert_fresh(r):
    """helm mode: every fresh install generates its own CA. (That an upgrade finds the existing
    Secret through `lookup` and keeps it needs a cluster: the `cluster` suite checks it with
    `helm upgrade` against a real API server.)"""
    def bundle():
        docs, _ = r.render_docs()
        return Manifests(docs).of("MutatingWebhookConfiguration")[0]["webhooks"][0]["clientConfig"]["caBundle"]
    return ["two fresh installs got the same CA"] if bundle() == bundle() else []


# Value shapes every release must lint cleanly with (beyond default values and ci/*-values.yaml):
# (title, value files relative to the chart, --set values).
LINT_SHAPES = [
    ("two scheduler replicas", [], ["scheduler.replicas=2"]),
    ("webhook TLS from helm, 1-year certificates", [], ["webhook.certs.mode=helm", "webhook.certs.validityDays=365"]),
]


def check_lint(r, chart_dir, variants):
    """`helm lint --strict` of every shape. Variants that need optional APIs (cert-manager,
    Prometheus operator) cannot lint: lint has no --api-versions, and the chart refuses them
    without those APIs by design (check_refusals); they are rendered with the APIs instead."""
    errs = []
    shapes = [(t, f, []) for t, f, api in variants if not api]
    shapes += [(t, [os.path.join(chart_dir, f) for f in files], sets) for t, files, sets in LINT_SHAPES]
    for title, files, sets in shapes:
        ok, out = r.lint(files, sets)
        if not ok or "[WARNING]" in out or "[ERROR]" in out:
            errs.append(f"helm lint --strict ({title}): " + " | ".join(
                l.strip() for l in out.splitlines() if "[" in l or "Error" in l)[:600])
    ok, out = r.lint([], ["scheduler.extender.wieght=5"])
    if ok or "wieght" not in out:
        errs.append("helm lint --strict accepted a misspelt value (scheduler.extender.wieght): " + out[-300:])
    return errs


def include_name(m, kind, component):
    for d in m.of(kind):
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component:
            return d["metadata"]["name"]
    return None


def check_helm_test_hook(m):
    """The `helm test` hook. (NOTES.txt renders only on a real install — helm template cannot
    print it and helm install --dry-run still needs a cluster — so the `cluster` suite checks the
    NOTES of its `helm install` against the installed objects.)"""
    errs = []
    tests = {p["metadata"].get("labels", {}).get("app.kubernetes.io/component"): p for p in m.of("Pod")
             if p["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"}
    if "test" not in tests:
        errs.append("want the helm test Pod (helm.sh/hook: test)")
    else:
        script = " ".join(tests["test"]["spec"]["containers"][0]["command"])
        svc = workload_of(m, "scheduler") and include_name(m, "Service", "scheduler")
        if svc and svc not in script:
            errs.append(f"helm test does not query the scheduler Service {svc}")
    agent = workload_of(m, "agent")
    doctor = tests.get("test-doctor")
    if agent is not None and doctor is not None:
        cmd = doctor["spec"]["containers"][0]["command"]
        if cmd[:3] != ["gpupack-agent", "--doctor", "--cluster"]:
            errs.append(f"helm test doctor: want gpupack-agent --doctor --cluster, got {cmd}")
        if doctor["spec"].get("serviceAccountName") != pod_spec(agent)["serviceAccountName"]:
            errs.append("helm test doctor: must run under the agent's service account (its RBAC lists the GPUNodes)")
        selector = dict(kv.split("=", 1) for kv in arg_after(cmd, "--agent-selector").split(","))
        if not selects(selector, agent["spec"]["template"]["metadata"]["labels"]):
            errs.append(f"helm test doctor: --agent-selector {selector} does not select the agent's pods")
    if set(tests) - {"test", "test-doctor"}:
        errs.append(f"unexpected helm test Pods {sorted(set(tests) - {'test', 'test-doctor'})}")
    return errs


# ---- live checks with the built binaries ------------------------------------------------------------------

def start(cmd, timeout=10):
    """Starts a binary whose first stdout line is its bound address; returns (proc, addr)."""
    log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty process never blocks on it
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    ready, _, _ = select.select([p.stdout], [], [], timeout)  # never block on a silent process
    line = p.stdout.readline() if ready else ""
    m = re.search(r"(\d+\.\d+\.\d+\.\d+|\[[0-9a-f:]+\]|localhost):(\d+)", line)
    if not m:
        p.kill()
        p.wait(timeout=10)
        log.seek(0)
        raise AssertionError(f"{cmd[0]} did not print its address within {timeout}s: {line!r} "
                             f"(exit {p.returncode}; stderr: {log.read()[-300:]!r})")
    return p, f"{m.group(1)}:{m.group(2)}"


def post_json(url, body, timeout=5):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read() or b"null")


def check_live_extender(m, ns, extender, cluster):
    """The extender, started with the chart's extender.yaml, answers every verb the scheduler
    config names at urlPrefix (on the port it actually bound)."""
    errs = []
    dep, cfg, cm = scheduler_config(m, ns)
    ext = cfg["extenders"][0]
    # The chart's config and command line, on free loopback ports (tests may run in parallel).
    ext_cfg = yaml.safe_load(cm["data"]["extender.yaml"])
    with socket.socket() as probe:  # a free port for the metrics listener, to probe it below
        probe.bind(("127.0.0.1", 0))
        metrics_addr = f"127.0.0.1:{probe.getsockname()[1]}"
    ext_cfg["metricsListen"] = metrics_addr
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(ext_cfg, f)
    cmd = list(container(dep, "extender")["command"])
    cmd[0] = extender
    cmd[cmd.index("--config") + 1] = f.name
    cmd[cmd.index("--listen") + 1] = "127.0.0.1:0"
    try:
        proc, addr = start(cmd + ["--standalone-cluster", cluster])
    except AssertionError as e:
        return [f"extender with the chart's command line and extender.yaml: {e}"]
    try:
        path = re.match(r"^http://[^/]+(.*)$", ext["urlPrefix"]).group(1).rstrip("/")
        pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
               "spec": {"containers": [{"name": "main", "resources": {"limits": {"gpupack.io/gpu-memory": "1Gi"}}}]}}
        bodies = {"filterVerb": {"Pod": pod, "Nodes": None, "NodeNames": []},
                  "prioritizeVerb": {"Pod": pod, "Nodes": None, "NodeNames": []},
                  "preemptVerb": {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": {}},
                  "bindVerb": {"PodName": "p", "PodNamespace": "default", "PodUID": "u-1", "Node": "no-such-node"}}
        for key, body in bodies.items():
            if key not in ext:
                continue
            url = f"http://{addr}{path}/{ext[key]}"
            try:
                status, _ = post_json(url, body)
                if status != 200:
                    errs.append(f"extender: POST {url} -> {status}")
            except urllib.error.HTTPError as e:
                errs.append(f"extender: POST {url} -> {e.code}: route missing or refused")
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                errs.append(f"extender: POST {url}: {e}")
        # The metrics listener (the pod IP in the chart) serves the probes' paths, never the verbs.
        for probe_path in ("/healthz", "/readyz", "/metrics"):
            last = None
            for _ in range(20):  # the second listener may come up just after the first line
                try:
                    with urllib.request.urlopen(f"http://{metrics_addr}{probe_path}", timeout=5) as resp:
                        last = resp.status
                        break
                except (urllib.error.URLError, OSError) as e:
                    last = e
                    time.sleep(0.1)
            if last != 200:
                errs.append(f"extender: metricsListen {probe_path}: {last}")
        try:
            post_json(f"http://{metrics_addr}{path}/bind", bodies["bindVerb"])
            errs.append("extender: the metrics listener answers the bind verb; it must stay on loopback")
        except urllib.error.HTTPError:
            pass
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return errs


def agent_status(agent, cluster):
    with open(cluster) as f:
        node = yaml.safe_load(f)["nodes"][0]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(node, f)
    p = subprocess.run([agent, "--node-name", node["name"], "--backend", "file:" + f.name, "--once", "--print"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError(f"gpupack-agent --once --print failed: {p.stderr[:300]}")
    report = json.loads(p.stdout)
    return report.get("status", report)


def check_live_agent_flags(m, agent, cluster):
    """The agent accepts the DaemonSet's command line (extraArgs included): run it once with the
    file backend and --print instead of NVML and the API server."""
    ds = workload_of(m, "agent")
    if ds is None:
        return []
    with open(cluster) as f:
        node = yaml.safe_load(f)["nodes"][0]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(node, f)
    cmd = list(container(ds, "agent")["command"])
    cmd = [node["name"] if a == "$(NODE_NAME)" else a for a in cmd]
    cmd[cmd.index("--backend") + 1] = "file:" + f.name
    cmd[0] = agent
    p = subprocess.run(cmd + ["--once", "--print"], capture_output=True, text=True, timeout=30)
    os.unlink(f.name)
    if p.returncode != 0:
        return [f"gpupack-agent refuses the DaemonSet's command line {cmd[1:]}: {p.stderr.strip()[:300]}"]
    return []


def check_live_webhook(m, ns, webhook):
    dep = workload_of(m, "webhook")
    cm_name = next(v["configMap"]["name"] for v in pod_spec(dep)["volumes"] if "configMap" in v)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "webhook.yaml")
        with open(cfg, "w") as f:
            f.write(m.get("ConfigMap", cm_name, ns)["data"]["webhook.yaml"])
        crt, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        rc, out = openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                          "-days", "1", "-subj", "/CN=gpupack-webhook")
        if rc != 0:
            return [f"openssl: {out}"]
        try:
            proc, _ = start([webhook, "--listen", "127.0.0.1:0", "--tls-cert-file", crt, "--tls-key-file", key,
                             "--config", cfg])
        except AssertionError as e:
            return [f"webhook with the chart's webhook.yaml: {e}"]
        proc.terminate()
        proc.wait(timeout=10)
    return []


# ---- main -------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", required=True, help="the helm binary")
    ap.add_argument("--chart", required=True)
    ap.add_argument("--extender")
    ap.add_argument("--agent")
    ap.add_argument("--webhook")
    ap.add_argument("--cluster")
    ap.add_argument("--source-root", help="repository root, to cross-check RBAC with the kube client's resources")
    args = ap.parse_args()
    r = chartlib.Renderer(args.helm, args.chart)
    ns = NAMESPACE
    failed = 0
    variants = [("default values", [], [])] + [
        (os.path.basename(f), [f], CI_API_VERSIONS) for f in sorted(glob.glob(os.path.join(args.chart, "ci", "*-values.yaml")))]
    if not variants[1:]:
        failed += chartlib.fail_if(["no ci/*-values.yaml variants"], "ci variants")
    live_status = None
    if args.agent and args.cluster:
        try:
            live_status = agent_status(args.agent, args.cluster)
        except (AssertionError, ValueError, subprocess.SubprocessError) as e:
            failed += chartlib.fail_if([str(e)], "agent --once --print")
    for title, files, api in variants:
        values = chartlib.merged_values(args.chart, files)
        try:
            docs, _ = r.render_docs(files, api_versions=api)
        except AssertionError as e:
            failed += chartlib.fail_if([str(e)], f"{title}: render")
            continue
        m = Manifests(docs)
        for name, fn in (("structure", lambda: check_structure(m, ns, values)),
                         ("scheduler config", lambda: check_scheduler(m, ns, values)),
                         ("rbac", lambda: check_rbac(m, ns, values)),
                         ("webhook", lambda: check_webhook(m, ns, values)),
                         ("agent", lambda: check_agent(m, values)),
                         ("crd", lambda: check_crd(m, values, live_status))):
            try:
                errs = fn()
            except (KeyError, StopIteration, AssertionError, TypeError) as e:
                errs = [f"check crashed on the rendered manifests: {type(e).__name__}: {e}"]
            failed += chartlib.fail_if(errs, f"{title}: {name}")
        if args.extender and args.cluster:
            failed += chartlib.fail_if(check_live_extender(m, ns, args.extender, args.cluster),
                                       f"{title}: extender routes (live)")
        if args.agent and args.cluster and values["agent"]["enabled"]:
            failed += chartlib.fail_if(check_live_agent_flags(m, args.agent, args.cluster), f"{title}: agent command line (live)")
        if args.webhook and values["webhook"]["enabled"]:
            failed += chartlib.fail_if(check_live_webhook(m, ns, args.webhook), f"{title}: webhook config (live)")
        if title == "default values":
            failed += chartlib.fail_if(check_helm_test_hook(m), "helm test hook")
    if args.source_root:
        scheduler_name = chartlib.merged_values(args.chart)["schedulerName"]
        failed += chartlib.fail_if(check_client_resources(args.source_root, ns, scheduler_name),
                                   "RBAC covers every resource the kube client addresses")
        failed += chartlib.fail_if(check_calls_in_code(args.source_root, ns, scheduler_name),
                                   "RBAC covers every kube client call in the extender's and agent's code")
    failed += chartlib.fail_if(check_schema_coverage(args.chart), "values.schema.json covers values.yaml")
    failed += chartlib.fail_if(check_value_references(args.chart), "templates read only values that exist")
    failed += chartlib.fail_if(check_chart_metadata(args.chart), "Chart.yaml")
    failed += chartlib.fail_if(check_refusals(r), "bad values are refused")
    failed += chartlib.fail_if(check_versions_and_checksum(r), "kube-scheduler version and config checksum")
    failed += chartlib.fail_if(check_webhook_cert_fresh(r), "webhook CA generated per install")
    failed += chartlib.fail_if(check_lint(r, args.chart, variants), "helm lint --strict of every shape")
    missing = [b for b in ("extender", "agent", "webhook") if not getattr(args, b)]
    if missing or not args.cluster:
        print(f"note: binaries not built here: {missing}" + ("" if args.cluster else ", no --cluster")
              + "; their live checks were skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
