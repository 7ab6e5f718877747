"""Shared helpers of the chart tests: rendering and linting with the real helm (built by
scripts/build-control-plane.sh), values merging, the metric catalog (docs/metrics.md) and PromQL
metric extraction."""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

NAMESPACE = "gpupack"
RELEASE = "gpupack"
KUBE_VERSION = "v1.30.2"
# Capabilities the ci/ variants need (ServiceMonitor/PrometheusRule, cert-manager).
CI_API_VERSIONS = ["monitoring.coreos.com/v1", "cert-manager.io/v1"]


class Renderer:
    """Renders and lints the chart with the real helm (`helm template`, `helm lint --strict`)."""

    def __init__(self, helm_bin, chart_dir):
        self.helm = helm_bin
        self.chart_dir = chart_dir
        # helm writes its config/cache under $HOME; keep the tests off the user's.
        home = os.path.join(tempfile.gettempdir(), "gpupack-chart-tests-helm")
        self.env = dict(os.environ, HELM_CACHE_HOME=home + "/cache", HELM_CONFIG_HOME=home + "/config",
                        HELM_DATA_HOME=home + "/data")

    def _run(self, cmd, value_files, sets, api_versions):
        for f in value_files:
            cmd += ["-f", f]
        for s in sets:
            cmd += ["--set", s]
        for a in api_versions:
            cmd += ["--api-versions", a]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=self.env)
        return p.returncode == 0, p.stdout, p.stderr

    def render(self, value_files=(), sets=(), kube_version=KUBE_VERSION, api_versions=(),
               namespace=NAMESPACE, release=RELEASE):
        """`helm template`; returns (ok, stdout, stderr)."""
        cmd = [self.helm, "template", release, self.chart_dir, "--namespace", namespace,
               "--kube-version", kube_version]
        return self._run(cmd, value_files, sets, api_versions)

    def lint(self, value_files=(), sets=(), kube_version=KUBE_VERSION):
        """`helm lint --strict`; returns (ok, output)."""
        cmd = [self.helm, "lint", "--strict", self.chart_dir, "--namespace", NAMESPACE,
               "--kube-version", kube_version]
        ok, out, err = self._run(cmd, value_files, sets, ())
        return ok, out + err

    def render_docs(self, *args, **kwargs):
        ok, out, err = self.render(*args, **kwargs)
        if not ok:
            raise AssertionError("render failed: " + err.strip())
        return [d for d in yaml.safe_load_all(out) if d is not None], out


def deep_merge(base, override):
    out = dict(base)
    for k, v in override.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def merged_values(chart_dir, value_files=()):
    with open(os.path.join(chart_dir, "values.yaml")) as f:
        values = yaml.safe_load(f) or {}
    for vf in value_files:
        with open(vf) as f:
            values = deep_merge(values, yaml.safe_load(f) or {})
    return values


# ---- metric catalog ------------------------------------------------------------------------------

DEVICE_LABELS = ["node", "gpu_uuid", "gpu_index", "gpu_model", "mig_profile"]
TARGET_LABELS = {"job", "instance"}


def load_catalog(path):
    """Parses docs/metrics.md tables: {name: {"type", "labels": set, "binary": str}}."""
    catalog = {}
    with open(path) as f:
        wanted = False
        for line in f:
            if line.startswith("#"):
                wanted = line.lower().startswith("### wanted")  # proposals, not exported
            if wanted or not line.startswith("| `"):
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if len(cells) < 5:
                continue
            name = cells[0].strip("`")
            labels_cell = re.sub(r"\([^)]*\)", "", cells[2])  # drop "(e.g. …)" explanations
            labels, enums = set(), {}
            if labels_cell.strip() not in ("—", "-", ""):
                for part in re.split(r",\s*(?=`)", labels_cell):
                    if part.strip() == "`DEV`":  # the device labels, alone or with more
                        labels.update(DEVICE_LABELS)
                        continue
                    m = re.match(r"\s*`([a-zA-Z_][a-zA-Z0-9_]*)`(\s*=\s*(.*))?", part)
                    if m:
                        labels.add(m.group(1))
                        values = re.findall(r"`([^`]*)`", m.group(3) or "")
                        if values and "\\|" in (m.group(3) or ""):  # an enum: `a`\|`b`
                            enums[m.group(1)] = set(values)
            catalog[name] = {"type": cells[1], "labels": labels, "binary": cells[3], "enums": enums}
    return catalog


PROMQL_WORDS = {
    # aggregations and functions
    "sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "rate", "irate", "increase", "delta", "idelta", "deriv",
    "histogram_quantile", "label_replace", "label_join", "abs", "absent", "absent_over_time",
    "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max", "time", "timestamp", "vector",
    "scalar", "sort", "sort_desc", "avg_over_time", "max_over_time", "min_over_time",
    "sum_over_time", "count_over_time", "last_over_time", "changes", "resets", "exp", "ln",
    "log2", "log10", "sqrt", "predict_linear", "holt_winters", "day_of_week", "hour", "minute",
    "label_values", "query_result", "metrics", "label_names",
    # keywords
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan",
}


def strip_strings(expr):
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)


def label_values(expr):
    """[(metric, label, [values])] for `label="v"` and `label=~"a|b"` matchers with plain values."""
    out = []
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", expr):
        for lm in re.finditer(r'(\w+)\s*(=~|=)\s*"([^"]*)"', m.group(2)):
            values = lm.group(3).split("|") if lm.group(2) == "=~" else [lm.group(3)]
            if all(re.fullmatch(r"[\w.-]+", v) for v in values):
                out.append((m.group(1), lm.group(1), values))
    return out


def selectors(expr):
    """[(metric, {label,...})] for every `metric{...}` and bare metric in the expression."""
    e = strip_strings(expr)
    e = re.sub(r"\$__\w+|\$\{?\w+\}?", "1", e)  # Grafana variables
    out = []
    # metric{labels}
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", e):
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2)))
        out.append((m.group(1), labels))
    # bare identifiers (not followed by '(' nor inside {} / by(...) lists)
    no_braces = re.sub(r"\{[^}]*\}", "", e)
    no_groupings = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", no_braces)
    no_ranges = re.sub(r"\[[^\]]*\]", "", no_groupings)
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w(])\s*(?!\()", no_ranges):
        word = m.group(1)
        if word.lower() in PROMQL_WORDS or re.fullmatch(r"[0-9.e]+", word):
            continue
        # a function call like rate( has "(" right after possible spaces
        rest = no_ranges[m.end():].lstrip()
        if rest.startswith("("):
            continue
        if not any(word == s[0] for s in out):
            out.append((word, set()))
    return out


def grouping_labels(expr):
    e = strip_strings(expr)
    labels = set()
    for m in re.finditer(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", e):
        labels.update(x.strip() for x in m.group(2).split(",") if x.strip())
    return labels


def base_metric(name):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix
    return name, ""


def check_expr(expr, catalog, where):
    """Errors for metrics or labels in `expr` that the catalog does not list."""
    errors = []
    metric_labels = set(TARGET_LABELS)
    # label_replace(v, "dst", ...) creates "dst".
    metric_labels |= set(re.findall(r'label_replace\([^,]+,\s*"(\w+)"', expr))
    found = []
    for metric, labels in selectors(expr):
        base, suffix = base_metric(metric)
        entry = catalog.get(metric) or (catalog.get(base) if suffix else None)
        if entry is None:
            errors.append(f"{where}: metric {metric} is not in docs/metrics.md")
            continue
        if suffix and entry is catalog.get(base) and entry["type"] != "histogram":
            errors.append(f"{where}: {metric}: {base} is a {entry['type']}, not a histogram")
        allowed = entry["labels"] | TARGET_LABELS | ({"le"} if suffix == "_bucket" else set())
        for label in labels - allowed:
            errors.append(f"{where}: {metric} has no label {label!r} (catalog: {sorted(entry['labels'])})")
        metric_labels |= allowed
        found.append(metric)
    for metric, label, values in label_values(expr):
        entry = catalog.get(metric) or catalog.get(base_metric(metric)[0])
        enum = entry.get("enums", {}).get(label) if entry else None
        for v in values:
            if enum is not None and v not in enum:
                errors.append(f"{where}: {metric}{{{label}={v!r}}}: {label} is one of {sorted(enum)}")
    for label in grouping_labels(expr) - metric_labels:
        errors.append(f"{where}: grouping label {label!r} is on none of {found}")
    return errors, found


def fail_if(errors, title):
    if errors:
        print(f"FAIL {title}:", file=sys.stderr)
        for e in errors:
            print("  - " + e, file=sys.stderr)
        return 1
    print(f"ok   {title}")
    return 0


def read_json(path):
    with open(path) as f:
        return json.load(f)
