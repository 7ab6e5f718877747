#!/usr/bin/env python3
"""Generates the Grafana dashboards in charts/gpupack/dashboards/ (classic JSON, schemaVersion 39).

Edit this file, not the JSON: `python3 charts/tests/gen_dashboards.py` rewrites them, and the
chart_dashboards test fails when the JSON and this generator disagree. Every metric used here must
be in docs/metrics.md (the same test checks it, and checks it against the binaries' /metrics).

Extender metrics are exported by every scheduler replica with the same values, so queries take
`max by (<identity>)` before summing, which keeps totals right with replicas > 1.
"""

import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "..", "gpupack", "dashboards")
RI = "$__rate_interval"
EXT = 'job="$job"'
KS = 'job="$ksjob"'


class Board:
    def __init__(self, uid, title, description, variables):
        self.uid, self.title, self.description = uid, title, description
        self.variables = variables
        self.panels = []
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1

    def row(self, title):
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def _newline(self):
        if self.x:
            self.y += self.row_h
            self.x, self.row_h = 0, 0

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def panel(self, kind, title, description, targets, unit, w=12, h=8, **extra):
        if self.x + w > 24:
            self._newline()
        p = {
            "type": kind, "title": title, "description": description, "id": self._id(),
            "datasource": DS,
            "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": extra.pop("overrides", [])},
            "options": extra.pop("options", {}),
            "targets": [],
        }
        defaults = p["fieldConfig"]["defaults"]
        if "thresholds" in extra:
            defaults["thresholds"] = {"mode": "absolute", "steps": extra.pop("thresholds")}
        if kind == "timeseries":
            defaults["custom"] = {"drawStyle": "line", "fillOpacity": 10, "showPoints": "never",
                                  "stacking": {"mode": extra.pop("stack", "none")}}
            if "thresholdLine" in extra:
                defaults["custom"]["thresholdsStyle"] = {"mode": "line"}
                defaults["thresholds"] = {"mode": "absolute", "steps": [
                    {"color": "green", "value": None}, {"color": "red", "value": extra.pop("thresholdLine")}]}
        if "min" in extra:
            defaults["min"] = extra.pop("min")
        if "max" in extra:
            defaults["max"] = extra.pop("max")
        for i, t in enumerate(targets):
            expr, legend = t[0], t[1]
            target = {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            if kind in ("table", "bargauge") or (len(t) > 2 and t[2] == "instant"):
                target["instant"] = True
                target["range"] = False
                if kind == "table":
                    target["format"] = "table"
            p["targets"].append(target)
        p.update(extra)
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)

    def to_json(self):
        return {
            "uid": self.uid, "title": self.title, "description": self.description,
            "tags": ["gpupack", "gpu"], "editable": True, "graphTooltip": 1,
            "schemaVersion": 39, "version": 1, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "timezone": "",
            "links": [{"title": "gpupack dashboards", "type": "dashboards", "tags": ["gpupack"], "asDropdown": True}],
            "annotations": {"list": []},
            "templating": {"list": self.variables},
            "panels": self.panels,
        }


def datasource_var():
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "includeAll": False, "multi": False}


def const_var(name, value, label):
    return {"name": name, "label": label, "type": "custom", "query": value, "hide": 2,
            "current": {"text": value, "value": value}, "options": [{"text": value, "value": value, "selected": True}]}


def query_var(name, label, query, multi=True, include_all=True, hide=0):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query, "query": {"query": query, "refId": "StandardVariableQuery"},
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all, "allValue": ".*",
            "current": {}, "hide": hide, "regex": ""}


# ---- Scheduler ----------------------------------------------------------------------------------------

def scheduler():
    b = Board("gpupack-scheduler", "gpupack / Scheduler",
              "Is the extender healthy and fast, and why are gpupack pods Pending? Extender verbs, node "
              "rejections, reservations, kube-scheduler's attempts for the gpupack profile, and sync health.",
              [datasource_var(), const_var("job", "gpupack-scheduler", "Extender job"),
               const_var("ksjob", "gpupack-kube-scheduler", "kube-scheduler job"),
               query_var("profile", "Scheduler profile", f"label_values(scheduler_schedule_attempts_total{{{KS}}}, profile)",
                         multi=False, include_all=False),
               query_var("verb", "Verb", f"label_values(gpupack_extender_requests_total{{{EXT}}}, verb)")])
    v = 'verb=~"$verb"'
    b.row("Extender")
    b.panel("timeseries", "Requests by verb and result",
            "Extender-protocol calls answered per second. result=error means kube-scheduler got an Error "
            "(a filter error fails the scheduling attempt).",
            [(f"sum by (verb, result) (rate(gpupack_extender_requests_total{{{EXT}, {v}}}[{RI}]))", "{{verb}} {{result}}")],
            "reqps", w=8)
    b.panel("timeseries", "Latency p50 / p99 by verb",
            "Server-side time per call. The red line is the default httpTimeout (5s): a filter call that "
            "reaches it fails the attempt.",
            [(f"histogram_quantile(0.99, sum by (le, verb) (rate(gpupack_extender_request_duration_seconds_bucket{{{EXT}, {v}}}[{RI}])))", "p99 {{verb}}"),
             (f"histogram_quantile(0.5, sum by (le, verb) (rate(gpupack_extender_request_duration_seconds_bucket{{{EXT}, {v}}}[{RI}])))", "p50 {{verb}}")],
            "s", w=8, thresholdLine=5)
    b.panel("timeseries", "Error ratio by verb",
            "Share of calls answered with an error.",
            [(f"sum by (verb) (rate(gpupack_extender_requests_total{{{EXT}, {v}, result=\"error\"}}[{RI}])) / "
              f"sum by (verb) (rate(gpupack_extender_requests_total{{{EXT}, {v}}}[{RI}]))", "{{verb}}")],
            "percentunit", w=8, min=0)
    b.panel("timeseries", "Node rejections by reason",
            "Nodes the filter turned down per second, by reason: why pods do not fit.",
            [(f"sum by (reason) (rate(gpupack_filter_node_rejections_total{{{EXT}}}[{RI}]))", "{{reason}}")],
            "cps", w=12, stack="normal")
    b.panel("bargauge", "Top rejection reasons (last hour)",
            "Rejected nodes per reason over the last hour.",
            [(f"sort_desc(sum by (reason) (increase(gpupack_filter_node_rejections_total{{{EXT}}}[1h])))", "{{reason}}")],
            "short", w=12, options={"orientation": "horizontal", "displayMode": "gradient",
                                    "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("timeseries", "Bind outcomes",
            "Bind verbs per second: ok, no_fit (the chosen node no longer had room on a device), "
            "bound_elsewhere (the pod holds devices on another node), bind_in_progress (a second bind while "
            "the first is in flight), node_stale (the node's agent stopped reporting), error.",
            [(f"sum by (result) (rate(gpupack_extender_requests_total{{{EXT}, verb=\"bind\"}}[{RI}]))", "{{result}}")],
            "reqps", w=6)
    b.panel("timeseries", "API-server Bindings by result",
            "Bindings written per second: success, conflict (a 409, or another replica's bind found by "
            "the fresh read: failover or two active replicas), error (API server unreachable, timeouts).",
            [(f"sum by (result) (rate(gpupack_bind_requests_total{{{EXT}}}[{RI}]))", "{{result}}")],
            "reqps", w=6)
    b.panel("timeseries", "Reservations in flight",
            "Placements reserved at bind and not yet confirmed by the pod watch, per replica.",
            [(f"max by (instance) (gpupack_reservations{{{EXT}}})", "{{instance}}")],
            "short", w=6, min=0)
    b.panel("timeseries", "Reservation expiries",
            "Reservations dropped unconfirmed after their TTL: leaked or very slow binds.",
            [(f"sum(rate(gpupack_reservations_expired_total{{{EXT}}}[{RI}]))", "expired")],
            "cps", w=6, min=0)
    b.panel("timeseries", "Workload learner: pods counted by source",
            "Pods counted into the placement policy's learned workload per second, per replica, each once: "
            "asked (its filter or bind), waiting (pending when an early refresh looked; a burst that waits "
            "is learned whole at once), held (holding devices when the replica synced: a restart).",
            [(f"sum by (instance, source) (rate(gpupack_learner_pods_total{{{EXT}}}[{RI}]))", "{{instance}} {{source}}")],
            "cps", w=12, min=0)
    b.panel("timeseries", "Policy refreshes",
            "Rebuilds of the placement policy from the learned workload, per replica: at the sync, after "
            "1, 2, 4, ... 64 pods, then every workload.refreshPods, sooner when the mix changes.",
            [(f"sum by (instance) (rate(gpupack_policy_refreshes_total{{{EXT}}}[{RI}]))", "{{instance}}")],
            "cps", w=12, min=0)

    b.row("kube-scheduler (gpupack profile)")
    b.panel("timeseries", "Scheduling attempts by result",
            "kube-scheduler's attempts for the profile: scheduled, unschedulable (no node fits), error "
            "(includes extender errors and timeouts).",
            [(f"sum by (result) (rate(scheduler_schedule_attempts_total{{{KS}, profile=\"$profile\"}}[{RI}]))", "{{result}}")],
            "cps", w=8)
    b.panel("timeseries", "Attempt latency p99 vs extender filter p99",
            "Whole attempt (algorithm + binding, our calls included) against the extender's own filter time.",
            [(f"histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket{{{KS}, profile=\"$profile\"}}[{RI}])))", "attempt p99"),
             (f"histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_algorithm_duration_seconds_bucket{{{KS}}}[{RI}])))", "algorithm p99"),
             (f"histogram_quantile(0.99, sum by (le) (rate(gpupack_extender_request_duration_seconds_bucket{{{EXT}, verb=\"filter\"}}[{RI}])))", "extender filter p99")],
            "s", w=8)
    b.panel("timeseries", "End-to-end scheduling p99",
            "From first enqueue to scheduled (kube-scheduler SLI).",
            [(f"histogram_quantile(0.99, sum by (le) (rate(scheduler_pod_scheduling_sli_duration_seconds_bucket{{{KS}}}[{RI}])))", "p99")],
            "s", w=8)
    b.panel("timeseries", "Pending pods by queue",
            "Pods waiting in the gpupack scheduler: active, backoff, unschedulable, gated.",
            [(f"sum by (queue) (scheduler_pending_pods{{{KS}}})", "{{queue}}")],
            "short", w=8, min=0)
    b.panel("timeseries", "Unschedulable pods by plugin",
            "Pods kube-scheduler parked as unschedulable; plugin=Extender means gpupack's filter rejected every node.",
            [(f"sum by (plugin) (scheduler_unschedulable_pods{{{KS}, profile=\"$profile\"}})", "{{plugin}}")],
            "short", w=8, min=0)
    b.panel("timeseries", "In-flight prioritize and bind goroutines",
            "Concurrent extender prioritize calls and binds inside kube-scheduler.",
            [(f"sum by (operation) (scheduler_goroutines{{{KS}}})", "{{operation}}")],
            "short", w=8, min=0)

    b.row("Health")
    b.panel("stat", "Targets up",
            "Scrape health of every gpupack target (1 = up).",
            [('sum by (job) (up{job=~"$job|$ksjob|gpupack-agent|gpupack-webhook"})', "{{job}}")],
            "short", w=6, h=6, thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}],
            options={"reduceOptions": {"calcs": ["lastNotNull"], "values": False}, "colorMode": "background"})
    b.panel("timeseries", "Extender ready",
            "1 when a replica's cluster state is synced and it serves verbs (/readyz); a replica that is "
            "not ready answers verbs with an error.",
            [(f"max by (instance) (gpupack_extender_ready{{{EXT}}})", "{{instance}}")],
            "short", w=6, h=6, min=0, max=1)
    b.panel("timeseries", "Inventory",
            "Nodes in the extender's GPU inventory and pods holding devices in its ledger.",
            [(f"max(gpupack_nodes{{{EXT}}})", "nodes"), (f"max(gpupack_pods{{{EXT}}})", "pods")],
            "short", w=6, h=6, min=0)
    b.panel("bargauge", "Oldest GPUNode heartbeats",
            "Seconds since the heartbeat of each node's GPUNode as the extender last accepted it (cluster "
            "mode); past the extender's heartbeat TTL (120s by default) the node is unschedulable for "
            "gpupack pods, whether the agent stopped writing or the extender stopped hearing.",
            [(f"topk(10, time() - max by (node) (gpupack_node_report_timestamp_seconds{{{EXT}}}))", "{{node}}")],
            "s", w=6, h=6, thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 120}],
            options={"orientation": "horizontal", "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("timeseries", "Informer sync age",
            "Seconds since the extender's informers last received a list, an event or a bookmark (cluster "
            "mode). A growing age means the cache, and so every verdict, is going stale.",
            [(f"time() - max by (resource) (gpupack_kube_last_sync_timestamp_seconds{{{EXT}}})", "{{resource}}")],
            "s", w=12, h=6, min=0)
    b.panel("timeseries", "Watch restarts and relists",
            "Watch restarts every few minutes are normal; frequent relists mean 410 Gone or API-server trouble.",
            [(f"sum by (resource) (rate(gpupack_kube_watch_restarts_total{{{EXT}}}[{RI}]))", "restart {{resource}}"),
             (f"sum by (resource) (rate(gpupack_kube_relists_total{{{EXT}}}[{RI}]))", "relist {{resource}}")],
            "cps", w=12, h=6)
    b.panel("timeseries", "Webhook reviews by result",
            "AdmissionReviews per second: patched (gpupack pod routed and capped), skipped, denied, error.",
            [(f"sum by (result) (rate(gpupack_webhook_requests_total[{RI}]))", "{{result}}")],
            "reqps", w=8)
    b.panel("timeseries", "Webhook latency p99",
            "Time to answer one AdmissionReview.",
            [(f"histogram_quantile(0.99, sum by (le) (rate(gpupack_webhook_request_duration_seconds_bucket[{RI}])))", "p99")],
            "s", w=8)
    b.panel("timeseries", "Webhook reviews denied or failed",
            "Share of AdmissionReviews denied (invalid gpupack request) or failed.",
            [(f"sum by (result) (rate(gpupack_webhook_requests_total{{result=~\"denied|error\"}}[{RI}])) / "
              f"scalar(sum(rate(gpupack_webhook_requests_total[{RI}])))", "{{result}}")],
            "percentunit", w=8, min=0)
    b.panel("table", "Running builds",
            "Version and git revision of every gpupack binary Prometheus scrapes, with how many "
            "targets run each: more than one row per job means a rollout in progress or a mixed fleet.",
            [("count by (job, version, revision) (gpupack_build_info)", "")],
            "none", w=24, h=6,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True},
                                                            "renameByName": {"Value": "targets"}}}])
    return b


# ---- Capacity & fragmentation ------------------------------------------------------------------------------

def capacity():
    b = Board("gpupack-capacity", "gpupack / Capacity & fragmentation",
              "How full and how fragmented is each node and GPU: capacity, allocated caps, live use, free "
              "memory the typical pod cannot use, largest free device, MIG layout.",
              [datasource_var(), const_var("job", "gpupack-scheduler", "Extender job"),
               query_var("node", "Node", f"label_values(gpupack_gpu_memory_bytes{{{EXT}}}, node)")])
    sel = f'{EXT}, node=~"$node"'
    dev = "node, gpu_uuid"

    def total(metric):
        return f"sum(max by ({dev}) ({metric}{{{sel}}}))"

    def per_node(metric):
        return f"sum by (node) (max by ({dev}) ({metric}{{{sel}}}))"

    cluster_free = f"(max(gpupack_cluster_gpu_memory_bytes{{{EXT}}}) - max(gpupack_cluster_gpu_memory_allocated_bytes{{{EXT}}}))"
    b.row("Cluster")
    b.panel("stat", "GPU memory", "Schedulable capacity of the selected nodes' devices (whole GPUs and MIG instances).",
            [(total("gpupack_gpu_memory_bytes"), "capacity")], "bytes", w=4, h=5)
    b.panel("stat", "Allocated (caps)", "Sum of the caps placed on the selected nodes' devices.",
            [(total("gpupack_gpu_memory_allocated_bytes"), "allocated")], "bytes", w=4, h=5)
    b.panel("stat", "Used (live)", "Live memory in use, as the node agents report it.",
            [(total("gpupack_gpu_memory_used_bytes"), "used")], "bytes", w=4, h=5)
    b.panel("gauge", "Allocated share", "Allocated caps / capacity.",
            [(f"{total('gpupack_gpu_memory_allocated_bytes')} / {total('gpupack_gpu_memory_bytes')}", "allocated")],
            "percentunit", w=4, h=5, min=0, max=1,
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 0.75}, {"color": "red", "value": 0.9}])
    b.panel("gauge", "Fragmented share of free (cluster)",
            "FGD fragmentation over the whole cluster (not filtered by node): the share of free GPU memory "
            "that the typical pod (the learned request mix) could not use.",
            [(f"max(gpupack_cluster_fragmentation_ratio{{{EXT}}})", "fragmented")],
            "percentunit", w=4, h=5, min=0, max=1,
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 0.3}, {"color": "red", "value": 0.6}])
    b.panel("stat", "Fragmented free memory (cluster)",
            "Free GPU memory the typical pod could not use: fragmentation ratio x free memory, whole cluster.",
            [(f"max(gpupack_cluster_fragmentation_ratio{{{EXT}}}) * {cluster_free}", "fragmented")], "bytes", w=4, h=5)

    b.row("Per node")
    b.panel("timeseries", "Capacity vs allocated vs used by node",
            "Capacity, caps and live use per node.",
            [(per_node("gpupack_gpu_memory_bytes"), "{{node}} capacity"),
             (per_node("gpupack_gpu_memory_allocated_bytes"), "{{node}} allocated"),
             (per_node("gpupack_gpu_memory_used_bytes"), "{{node}} used")],
            "bytes", w=12, h=9, min=0)
    b.panel("timeseries", "Free memory vs largest free device by node",
            "Free memory per node, and the most free on any single device: a pod needing more than the "
            "largest free device cannot land there however much the node has in total (fragmentation).",
            [(f"{per_node('gpupack_gpu_memory_bytes')} - {per_node('gpupack_gpu_memory_allocated_bytes')}", "{{node}} free"),
             (f"max by (node) (max by ({dev}) (gpupack_gpu_memory_bytes{{{sel}}}) - max by ({dev}) (gpupack_gpu_memory_allocated_bytes{{{sel}}}))",
              "{{node}} largest free device")],
            "bytes", w=12, h=9, min=0)
    b.panel("timeseries", "Fragmented free memory by node",
            "Per node, the free GPU memory the typical pod (the learned request mix) could not use: FGD's "
            "expected fragmentation. A node high here has free memory in pieces too small for what arrives.",
            [(f"max by (node) (gpupack_node_fragmented_gpu_memory_bytes{{{sel}}})", "{{node}}")],
            "bytes", w=12, h=9, min=0)
    b.panel("timeseries", "Pods per device",
            "How many pods share each device (bound or reserved).",
            [(f"max by (node, gpu_index, gpu_uuid) (gpupack_gpu_pods{{{sel}}})", "{{node}} #{{gpu_index}}")],
            "none", w=12, h=9, min=0)
    b.panel("timeseries", "Capacity reservation by node",
            "Nodes that constrained pod shapes (a pinned GPU model, a rare shape only a few nodes can host) "
            "depend on, with their tightness: a pod placed there is charged this many MiB per MiB it takes, "
            "so pods that could go elsewhere leave them alone when FGD scores another node equally. Only "
            "priced nodes have a series; it changes at each policy refresh (docs/placement.md).",
            [(f"max by (node) (gpupack_node_reservation_tightness{{{sel}}})", "{{node}}")],
            "none", w=24, h=8, min=0)

    b.row("Namespaces and exclusions")
    b.panel("timeseries", "Allocated GPU memory by namespace",
            "Caps allocated to each namespace's pods (whole-device pods count their devices' full size): what a "
            "ResourceQuota on requests.gpupack.io/gpu-memory is measured against (docs/annotations.md, Quota).",
            [(f"max by (namespace) (gpupack_namespace_gpu_memory_allocated_bytes{{{EXT}}})", "{{namespace}}")],
            "bytes", w=12, h=8, min=0)
    b.panel("timeseries", "Devices excluded by the administrator",
            "Devices taken out of gpupack's pool per node (node annotation gpupack.io/excluded-devices): their "
            "running pods stay, nothing new lands there, and the node advertises less capacity.",
            [(f"max by (node) (gpupack_node_excluded_gpus{{{sel}}})", "{{node}}")],
            "short", w=12, h=8, min=0)

    b.row("Per GPU / MIG instance")
    keys = "node, gpu_index, gpu_uuid, gpu_model, mig_profile"
    b.panel("table", "Devices",
            "One row per device the extender schedules on: a whole GPU (empty mig_profile), or a MIG "
            "instance (MIG-... UUID and its profile).",
            [(f"max by ({keys}) (gpupack_gpu_memory_bytes{{{sel}}})", ""),
             (f"max by ({keys}) (gpupack_gpu_memory_allocated_bytes{{{sel}}})", ""),
             (f"max by ({keys}) (gpupack_gpu_memory_used_bytes{{{sel}}})", "")],
            "bytes", w=24, h=10,
            transformations=[{"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True},
                                                            "renameByName": {"Value #A": "capacity", "Value #B": "allocated",
                                                                             "Value #C": "used"}}}],
            overrides=[{"matcher": {"id": "byName", "options": "gpu_index"},
                        "properties": [{"id": "unit", "value": "none"}]}])
    b.panel("bargauge", "Allocated share per device",
            "Caps / capacity of each device.",
            [(f"max by (node, gpu_index, gpu_uuid) (gpupack_gpu_memory_allocated_bytes{{{sel}}}) / "
              f"max by (node, gpu_index, gpu_uuid) (gpupack_gpu_memory_bytes{{{sel}}})", "{{node}} #{{gpu_index}} {{gpu_uuid}}")],
            "percentunit", w=12, h=10, min=0, max=1,
            options={"orientation": "horizontal", "displayMode": "gradient",
                     "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("timeseries", "Allocated vs used per device",
            "Caps against live use: far above the caps = processes outside gpupack; far below = over-requests.",
            [(f"max by (node, gpu_index, gpu_uuid) (gpupack_gpu_memory_allocated_bytes{{{sel}}})", "{{node}} #{{gpu_index}} allocated"),
             (f"max by (node, gpu_index, gpu_uuid) (gpupack_gpu_memory_used_bytes{{{sel}}})", "{{node}} #{{gpu_index}} used")],
            "bytes", w=12, h=10, min=0)
    mig = 'node=~"$node", mig_profile!=""'
    mkeys = "node, gpu_index, gpu_uuid, mig_profile"
    b.panel("table", "MIG layout (node agents)",
            "MIG instances per GPU as the node agents see them: profile, memory, caps and live use.",
            [(f"max by ({mkeys}) (gpupack_agent_gpu_memory_total_bytes{{{mig}}})", ""),
             (f"max by ({mkeys}) (gpupack_agent_gpu_memory_allocated_bytes{{{mig}}})", ""),
             (f"max by ({mkeys}) (gpupack_agent_gpu_memory_used_bytes{{{mig}}})", "")],
            "bytes", w=12, h=8,
            transformations=[{"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True},
                                                            "renameByName": {"Value #A": "memory", "Value #B": "allocated",
                                                                             "Value #C": "used"}}}],
            overrides=[{"matcher": {"id": "byName", "options": "gpu_index"}, "properties": [{"id": "unit", "value": "none"}]}])
    b.panel("timeseries", "Used per GPU: DCGM exporter vs gpupack caps (needs dcgm-exporter)",
            "Only on clusters running NVIDIA's dcgm-exporter: framebuffer used (MiB converted to bytes) per GPU "
            "UUID against gpupack's caps on that GPU (whole GPUs; DCGM reports MIG under the parent UUID).",
            [('sum by (gpu_uuid) (label_replace(DCGM_FI_DEV_FB_USED, "gpu_uuid", "$1", "UUID", "(.*)")) * 1048576', "{{gpu_uuid}} DCGM used"),
             (f"max by (gpu_uuid) (gpupack_gpu_memory_allocated_bytes{{{sel}}})", "{{gpu_uuid}} gpupack allocated")],
            "bytes", w=12, h=8, min=0)
    return b


# ---- Workloads -----------------------------------------------------------------------------------------------

def workloads():
    b = Board("gpupack-workloads", "gpupack / Workloads",
              "Is every pod's cap enforced, and how close is each container to its cap? Per-container cap vs "
              "live use from the node agents.",
              [datasource_var(),
               query_var("node", "Node", "label_values(gpupack_agent_container_memory_cap_bytes, node)"),
               query_var("namespace", "Namespace", 'label_values(gpupack_agent_container_memory_cap_bytes{node=~"$node"}, namespace)'),
               query_var("pod", "Pod", 'label_values(gpupack_agent_container_memory_cap_bytes{node=~"$node", namespace=~"$namespace"}, pod)')])
    sel = 'node=~"$node", namespace=~"$namespace", pod=~"$pod"'
    c = "namespace, pod, container"
    used = f"sum by ({c}) (gpupack_agent_container_memory_used_bytes{{{sel}}})"
    cap = f"sum by ({c}) (gpupack_agent_container_memory_cap_bytes{{{sel}}})"

    b.row("Overview")
    b.panel("stat", "gpupack containers", "Containers with a gpupack cap on the selected nodes.",
            [(f"count(count by ({c}) (gpupack_agent_container_memory_cap_bytes{{{sel}}}))", "containers")], "short", w=6, h=5)
    b.panel("stat", "Over their cap", "Containers using more memory than their cap on some device.",
            [(f"count((gpupack_agent_container_memory_used_bytes{{{sel}}} > gpupack_agent_container_memory_cap_bytes{{{sel}}})) or vector(0)", "over cap")],
            "short", w=6, h=5, thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("stat", "Unenforced caps", "Container caps the agent could not verify in force.",
            [(f"count(gpupack_agent_container_memory_enforced{{{sel}}} == 0) or vector(0)", "unenforced")],
            "short", w=6, h=5, thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
            options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("stat", "Processes of no gpupack pod", "Processes on gpupack devices that belong to no gpupack container (audit).",
            [('sum(gpupack_agent_audit_findings{node=~"$node", kind="foreign-process"})', "foreign")], "short", w=6, h=5,
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
            options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})

    b.row("Cap vs use")
    b.panel("timeseries", "Cap vs live use per container",
            "Each container's live GPU memory against its cap (summed over its devices).",
            [(used, "{{namespace}}/{{pod}}/{{container}} used"), (cap, "{{namespace}}/{{pod}}/{{container}} cap")],
            "bytes", w=12, h=9, min=0)
    b.panel("bargauge", "Use of cap, top 20",
            "Live use / cap of the 20 containers closest to their cap.",
            [(f"topk(20, {used} / {cap})", "{{namespace}}/{{pod}}/{{container}}")],
            "percentunit", w=12, h=9, min=0, max=1,
            thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 0.9}, {"color": "red", "value": 1}],
            options={"orientation": "horizontal", "displayMode": "gradient",
                     "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("table", "Containers near or over their cap (> 90%)",
            "Per device: use / cap above 0.9.",
            [(f"gpupack_agent_container_memory_used_bytes{{{sel}}} / gpupack_agent_container_memory_cap_bytes{{{sel}}} > 0.9", "")],
            "percentunit", w=12, h=8,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "job": True, "instance": True}}}])
    b.panel("table", "Unenforced containers",
            "Containers without a driver limit in place on a device (gpupack_agent_container_memory_enforced == 0).",
            [(f"gpupack_agent_container_memory_enforced{{{sel}}} == 0", "")],
            "short", w=12, h=8,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "Value": True}}}])

    b.row("Compute")
    b.panel("timeseries", "Compute share vs SM time per container",
            "Each container's compute share (percent of a device's SMs, gpupack.io/gpu-compute or its memory's "
            "share) against the share of the SMs' time its processes ran, per device. Without MPS the contexts "
            "time-slice, so time above the share is compute taken from its neighbours (the over-compute audit).",
            [(f"gpupack_agent_container_compute_used_percent{{{sel}}}", "{{namespace}}/{{pod}}/{{container}} used"),
             (f"gpupack_agent_container_compute_share_percent{{{sel}}}", "{{namespace}}/{{pod}}/{{container}} share")],
            "percent", w=12, h=9, min=0)
    b.panel("timeseries", "Compute allocated vs SM utilisation per GPU",
            "Sum of the compute shares placed on each GPU against NVML's SM utilisation of it.",
            [('max by (node, gpu_uuid) (gpupack_agent_gpu_compute_allocated_percent{node=~"$node"})',
              "{{node}} {{gpu_uuid}} allocated"),
             ('max by (node, gpu_uuid) (gpupack_agent_gpu_sm_utilization_percent{node=~"$node"})',
              "{{node}} {{gpu_uuid}} SM busy")],
            "percent", w=12, h=9, min=0)
    b.panel("table", "How compute is held per GPU",
            "mps-namespace (a hard ceiling), mps-client (the MPS thread percentage, no boundary), or none "
            "(scheduled and audited only); docs/agent.md \"Compute enforcement\".",
            [('max by (node, gpu_uuid, mode) (gpupack_agent_gpu_compute_enforcement{node=~"$node"}) == 1', "")],
            "short", w=12, h=8,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}])
    b.panel("timeseries", "Compute per namespace",
            "Each namespace's compute shares and SM time on each node, percent of one device.",
            [('sum by (namespace) (gpupack_agent_namespace_compute_allocated_percent{node=~"$node", namespace=~"$namespace"})',
              "{{namespace}} allocated"),
             ('sum by (namespace) (gpupack_agent_namespace_compute_used_percent{node=~"$node", namespace=~"$namespace"})',
              "{{namespace}} used")],
            "percent", w=12, h=8, min=0)

    b.row("Right-sizing: requested vs peak vs recommended")
    w = "namespace, workload_kind, workload, container"
    wsel = 'namespace=~"$namespace"'
    # Every scheduler replica exports the same figures: max by the workload keeps one.
    requested = f"max by ({w}) (gpupack_workload_gpu_memory_requested_bytes{{{wsel}}})"
    peak = f"max by ({w}) (gpupack_workload_gpu_memory_peak_bytes{{{wsel}}})"
    guaranteed = f'max by ({w}) (gpupack_workload_gpu_memory_recommended_bytes{{{wsel}, bound="guaranteed"}})'
    ceiling = f'max by ({w}) (gpupack_workload_gpu_memory_recommended_bytes{{{wsel}, bound="ceiling"}})'
    b.panel("timeseries", "Requested vs peak vs recommended per workload",
            "Per device: the share each workload container asks for, the peak its pods used (over their life, "
            "kept per owning workload across restarts), and the guaranteed share recommended (docs/recommendations.md). "
            "Advice only: nothing changes a running pod.",
            [(requested, "{{namespace}}/{{workload}}/{{container}} requested"),
             (peak, "{{namespace}}/{{workload}}/{{container}} peak"),
             (guaranteed, "{{namespace}}/{{workload}}/{{container}} recommended")],
            "bytes", w=12, h=9, min=0)
    b.panel("bargauge", "Memory a pod would give back, top 20",
            "Per device: requested − recommended guaranteed share, for the 20 workloads with the most to give back "
            "(gpupack-extender recommend prints the values to apply).",
            [(f"topk(20, {requested} - {guaranteed})", "{{namespace}}/{{workload}}/{{container}}")],
            "bytes", w=12, h=9, min=0,
            options={"orientation": "horizontal", "displayMode": "gradient",
                     "reduceOptions": {"calcs": ["lastNotNull"], "values": False}})
    b.panel("timeseries", "Peak vs recommended ceiling per workload",
            "Per device: the highest use seen against the recommended ceiling (gpupack.io/gpu-memory-limit).",
            [(peak, "{{namespace}}/{{workload}}/{{container}} peak"),
             (ceiling, "{{namespace}}/{{workload}}/{{container}} ceiling")],
            "bytes", w=12, h=8, min=0)
    b.panel("table", "Right-sizing verdicts",
            "Each workload container's verdict: shrink (the recommendation is smaller), keep, at-cap (its use reached "
            "the cap, so its need is unknown), too-few-samples.",
            [(f'max by ({w}, verdict) (gpupack_workload_rightsizing_verdict{{{wsel}}}) == 1', "")],
            "short", w=12, h=8,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}])

    b.row("Nodes")
    b.panel("table", "Enforcement per node",
            "How each node enforces caps: cgroup-dmem, cgroup-misc (R615+ per-cgroup limits), mps, or none.",
            [('max by (node, mode) (gpupack_agent_enforcement_mode{node=~"$node"}) == 1', "")],
            "short", w=12, h=8,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}])
    b.panel("timeseries", "Audit findings by node and kind",
            "Current findings: over-cap containers, unenforced caps, processes of no gpupack pod.",
            [('sum by (node, kind) (gpupack_agent_audit_findings{node=~"$node"})', "{{node}} {{kind}}")],
            "short", w=12, h=8, min=0)
    b.panel("timeseries", "Agent report age",
            "Seconds since each agent last wrote its GPUNode status.",
            [('time() - max by (node) (gpupack_agent_report_timestamp_seconds{node=~"$node"})', "{{node}}")],
            "s", w=8, min=0)
    b.panel("timeseries", "Agent reports by result",
            "GPUNode status writes per second (skipped = nothing changed and no heartbeat due).",
            [(f'sum by (result) (rate(gpupack_agent_reports_total{{node=~"$node"}}[{RI}]))', "{{result}}")],
            "cps", w=8)
    b.panel("timeseries", "NVML errors by call",
            "NVML calls that returned an error, per second.",
            [(f'sum by (node, call) (rate(gpupack_agent_nvml_errors_total{{node=~"$node"}}[{RI}]))', "{{node}} {{call}}")],
            "cps", w=8)
    b.panel("timeseries", "Enforcement actions",
            "Memory-limit operations on containers' cgroups: apply, verify, clear (before teardown), error.",
            [(f'sum by (action) (rate(gpupack_agent_enforcement_actions_total{{node=~"$node"}}[{RI}]))', "{{action}}")],
            "cps", w=8)
    b.panel("timeseries", "Unhealthy devices",
            "Devices that stopped answering NVML.",
            [('count by (node) (gpupack_agent_gpu_healthy{node=~"$node"} == 0)', "{{node}}")],
            "short", w=8, min=0)
    return b


BOARDS = {"gpupack-scheduler.json": scheduler, "gpupack-capacity.json": capacity, "gpupack-workloads.json": workloads}


def render_all():
    return {name: json.dumps(fn().to_json(), indent=2, sort_keys=False) + "\n" for name, fn in BOARDS.items()}


def main():
    for name, text in render_all().items():
        with open(os.path.join(OUT_DIR, name), "w") as f:
            f.write(text)
        print("wrote", os.path.normpath(os.path.join(OUT_DIR, name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
