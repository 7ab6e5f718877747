// Command render renders a Helm chart the way `helm template` does, for machines without a helm
// binary. It is built on the same libraries as Helm's renderer (Go's text/template and sprig v3)
// and adds Helm's own functions and built-in objects: include, tpl, required, fail, lookup
// (always empty, as under `helm template`), toYaml/fromYaml/fromYamlArray/toJson/fromJson,
// .Values/.Release/.Chart/.Capabilities/.Template/.Files. Values are merged like Helm (chart
// values.yaml, then each -f file, then --set; a null deletes a key) and validated against the
// chart's values.schema.json before rendering.
//
// Usage:
//
//	render --chart DIR [-f values.yaml]... [--set a.b=c]... [--namespace NS] [--release NAME]
//	       [--kube-version v1.30.0] [--api-versions group/version[/Kind]]... [--notes]
//	       [--lookup objects.yaml]
//
// --lookup gives `lookup` a cluster to answer from (a YAML list of objects), to test the
// upgrade paths that depend on it; without it lookup returns an empty object as under
// `helm template`.
//
// Prints the manifests on stdout, each preceded by "---" and "# Source: <chart>/templates/<file>".
// Exits 1 with the error on stderr when values, schema or templates fail.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	semver "github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	chartDir := flag.String("chart", "", "chart directory")
	namespace := flag.String("namespace", "default", "release namespace")
	release := flag.String("release", "gpupack", "release name")
	kubeVersion := flag.String("kube-version", "v1.30.0", "cluster version for .Capabilities.KubeVersion")
	notes := flag.Bool("notes", false, "also render templates/NOTES.txt")
	lookupFile := flag.String("lookup", "", "YAML list of objects that lookup finds")
	var valueFiles, sets, apiVersions multiFlag
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&sets, "set", "key.path=value (repeatable)")
	flag.Var(&apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	flag.Parse()
	if *chartDir == "" {
		fmt.Fprintln(os.Stderr, "render: --chart is required")
		os.Exit(2)
	}
	if *lookupFile != "" {
		if err := loadLookupObjects(*lookupFile); err != nil {
			fmt.Fprintln(os.Stderr, "render:", err)
			os.Exit(1)
		}
	}
	out, err := render(*chartDir, *namespace, *release, *kubeVersion, *notes, valueFiles, sets, apiVersions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}

func render(chartDir, namespace, release, kubeVersion string, notes bool,
	valueFiles, sets, apiVersions []string) (string, error) {
	chartMeta, err := readYAMLFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	chart := map[string]interface{}{}
	for k, v := range chartMeta {
		chart[strings.ToUpper(k[:1])+k[1:]] = v // Helm exposes Chart.yaml keys capitalised: .Chart.AppVersion
	}
	chartName, _ := chart["Name"].(string)

	values, err := readYAMLFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range valueFiles {
		override, err := readYAMLFile(f)
		if err != nil {
			return "", err
		}
		values = coalesce(values, override)
	}
	for _, s := range sets {
		if err := applySet(values, s); err != nil {
			return "", err
		}
	}
	pruneNulls(values) // a null deletes the key, as in Helm
	if schemaText, err := ioutil.ReadFile(filepath.Join(chartDir, "values.schema.json")); err == nil {
		var schema interface{}
		if err := json.Unmarshal(schemaText, &schema); err != nil {
			return "", fmt.Errorf("values.schema.json: %v", err)
		}
		if errs := validateSchema(schema, schema, toJSONValue(values), ""); len(errs) > 0 {
			return "", fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n- %s",
				chartName, strings.Join(errs, "\n- "))
		}
	}

	kv, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	if constraint, ok := chart["KubeVersion"].(string); ok && constraint != "" {
		c, err := semver.NewConstraint(constraint)
		if err != nil {
			return "", fmt.Errorf("Chart.yaml kubeVersion %q: %v", constraint, err)
		}
		v, err := semver.NewVersion(kv.Version)
		if err != nil || !c.Check(v) {
			return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", constraint, kv.Version)
		}
	}
	files, err := loadFiles(chartDir)
	if err != nil {
		return "", err
	}
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart":        chart,
		"Capabilities": &capabilities{KubeVersion: kv, APIVersions: newVersionSet(apiVersions)},
		"Files":        files,
	}

	templateDir := filepath.Join(chartDir, "templates")
	var names []string
	err = filepath.Walk(templateDir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)

	root := template.New("root")
	root.Option("missingkey=zero")
	root.Funcs(funcMap(root))
	for _, n := range names {
		text, err := ioutil.ReadFile(filepath.Join(chartDir, n))
		if err != nil {
			return "", err
		}
		if _, err := root.New(chartName + "/" + n).Parse(string(text)); err != nil {
			return "", err
		}
	}

	var out strings.Builder
	for _, n := range names {
		base := path.Base(n)
		if strings.HasPrefix(base, "_") || (base == "NOTES.txt" && !notes) {
			continue
		}
		full := chartName + "/" + n
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": full, "BasePath": chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, full, data); err != nil {
			return "", err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", full, strings.TrimRight(text, "\n"))
	}
	return out.String(), nil
}

// ---- values ----------------------------------------------------------------------------------

// readYAMLFile parses a YAML mapping the way Helm does (sigs.k8s.io/yaml: YAML → JSON → Go), so
// numbers become float64 exactly as in Helm and templates that compare them must convert.
func readYAMLFile(p string) (map[string]interface{}, error) {
	text, err := ioutil.ReadFile(p)
	if err != nil {
		return nil, err
	}
	m, err := yamlToMap(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return m, nil
}

func yamlToMap(text string) (map[string]interface{}, error) {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	v, ok := toJSONValue(normalize(raw)).(map[string]interface{})
	if !ok {
		return nil, errors.New("top level is not a mapping")
	}
	return v, nil
}

// normalize turns yaml.v2's map[interface{}]interface{} into map[string]interface{}.
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, val := range t {
			m[fmt.Sprint(k)] = normalize(val)
		}
		return m
	case map[string]interface{}:
		m := map[string]interface{}{}
		for k, val := range t {
			m[k] = normalize(val)
		}
		return m
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, val := range t {
			out[i] = normalize(val)
		}
		return out
	}
	return v
}

// toJSONValue round-trips through encoding/json: maps, slices, float64, string, bool, nil.
func toJSONValue(v interface{}) interface{} {
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return v
	}
	var out interface{}
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// coalesce merges override into base like Helm: maps merge recursively, anything else replaces,
// and a null in override deletes the key.
func coalesce(base, override map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range base {
		if v != nil {
			out[k] = v
		}
	}
	for k, v := range override {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]interface{})
		om, ook := v.(map[string]interface{})
		if bok && ook {
			out[k] = coalesce(bm, om)
		} else if ook {
			out[k] = coalesce(map[string]interface{}{}, om)
		} else {
			out[k] = v
		}
	}
	return out
}

func pruneNulls(m map[string]interface{}) {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		} else if child, ok := v.(map[string]interface{}); ok {
			pruneNulls(child)
		}
	}
}

// applySet handles --set a.b.c=value with Helm's scalar typing (int, bool, null, string).
func applySet(values map[string]interface{}, expr string) error {
	eq := strings.Index(expr, "=")
	if eq <= 0 {
		return fmt.Errorf("--set %q: want key=value", expr)
	}
	keys := strings.Split(expr[:eq], ".")
	raw := expr[eq+1:]
	var val interface{} = raw
	switch {
	case raw == "true" || raw == "false":
		val = raw == "true"
	case raw == "null":
		val = nil
	default:
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			val = float64(n)
		}
	}
	m := values
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = val
	return nil
}

// lookupObjects is the pretend cluster `lookup` reads (--lookup).
var lookupObjects []map[string]interface{}

func loadLookupObjects(p string) error {
	text, err := ioutil.ReadFile(p)
	if err != nil {
		return err
	}
	var raw interface{}
	if err := yaml.Unmarshal(text, &raw); err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	list, ok := toJSONValue(normalize(raw)).([]interface{})
	if !ok {
		return fmt.Errorf("%s: want a YAML list of objects", p)
	}
	for _, o := range list {
		m, ok := o.(map[string]interface{})
		if !ok {
			return fmt.Errorf("%s: every item must be an object", p)
		}
		lookupObjects = append(lookupObjects, m)
	}
	return nil
}

// ---- built-in objects --------------------------------------------------------------------------

type kubeVersion struct {
	Version, Major, Minor, GitVersion string
}

func (k kubeVersion) String() string { return k.Version }

var kubeVersionRE = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)\.([0-9]+)(.*)$`)

func parseKubeVersion(s string) (kubeVersion, error) {
	m := kubeVersionRE.FindStringSubmatch(s)
	if m == nil {
		return kubeVersion{}, fmt.Errorf("--kube-version %q: want vMAJOR.MINOR.PATCH", s)
	}
	v := "v" + strings.TrimPrefix(s, "v")
	return kubeVersion{Version: v, Major: m[1], Minor: m[2], GitVersion: v}, nil
}

// versionSet is .Capabilities.APIVersions: the built-in groups plus --api-versions.
type versionSet []string

var builtinAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "coordination.k8s.io/v1",
	"scheduling.k8s.io/v1", "node.k8s.io/v1", "storage.k8s.io/v1", "events.k8s.io/v1",
}

func newVersionSet(extra []string) versionSet {
	return versionSet(append(append([]string{}, builtinAPIVersions...), extra...))
}

// Has reports whether "group/version" or "group/version/Kind" is available, as in Helm.
func (v versionSet) Has(s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions versionSet
}

// files is .Files: every chart file outside templates/.
type files map[string][]byte

func loadFiles(chartDir string) (files, error) {
	f := files{}
	err := filepath.Walk(chartDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			if rel == "templates" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := ioutil.ReadFile(p)
		if err != nil {
			return err
		}
		f[rel] = b
		return nil
	})
	return f, err
}

func (f files) Get(name string) string      { return string(f[name]) }
func (f files) GetBytes(name string) []byte { return f[name] }
func (f files) Lines(name string) []string {
	return strings.Split(strings.TrimRight(string(f[name]), "\n"), "\n")
}

func (f files) Glob(pattern string) files {
	out := files{}
	for name, b := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = b
		}
	}
	return out
}

// AsConfig renders the files as the data block of a ConfigMap (base names as keys).
func (f files) AsConfig() string {
	m := map[string]string{}
	for name, b := range f {
		m[path.Base(name)] = string(b)
	}
	s, _ := toYAML(m)
	return s
}

// ---- functions -----------------------------------------------------------------------------------

func toYAML(v interface{}) (string, error) {
	var generic interface{}
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return "", err
	}
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(generic)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = func(v interface{}) string {
		s, err := toYAML(v)
		if err != nil {
			return ""
		}
		return s
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m, err := yamlToMap(s)
		if err != nil {
			return map[string]interface{}{"Error": err.Error()}
		}
		return m
	}
	f["fromYamlArray"] = func(s string) []interface{} {
		var raw interface{}
		if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
			return []interface{}{err.Error()}
		}
		a, _ := toJSONValue(normalize(raw)).([]interface{})
		return a
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(normalize(v))
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	f["fail"] = func(msg string) (string, error) { return "", errors.New(msg) }
	// lookup answers from --lookup objects; otherwise as under `helm template`: an empty object.
	f["lookup"] = func(apiVersion, kind, namespace, name string) map[string]interface{} {
		for _, o := range lookupObjects {
			md, _ := o["metadata"].(map[string]interface{})
			if o["apiVersion"] == apiVersion && o["kind"] == kind && md != nil &&
				md["name"] == name && (namespace == "" || md["namespace"] == namespace) {
				return o
			}
		}
		return map[string]interface{}{}
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return f
}

// ---- JSON schema (the draft-07 subset values.schema.json uses) ---------------------------------

func validateSchema(root, schema interface{}, v interface{}, at string) []string {
	s, ok := schema.(map[string]interface{})
	if !ok {
		if b, isBool := schema.(bool); isBool && !b {
			return []string{fmt.Sprintf("%s: not allowed", where(at))}
		}
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := resolveRef(root, ref)
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", where(at), err)}
		}
		return validateSchema(root, target, v, at)
	}
	var errs []string
	if t, ok := s["type"]; ok && !typeMatches(t, v) {
		return []string{fmt.Sprintf("%s: got %s, want %v", where(at), jsonType(v), t)}
	}
	if e, ok := s["enum"].([]interface{}); ok {
		found := false
		for _, x := range e {
			if fmt.Sprint(x) == fmt.Sprint(v) && jsonType(x) == jsonType(v) {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", where(at), v, e))
		}
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		errs = append(errs, fmt.Sprintf("%s: must be %v", where(at), c))
	}
	if not, ok := s["not"]; ok && len(validateSchema(root, not, v, at)) == 0 {
		errs = append(errs, fmt.Sprintf("%s: %v is not allowed", where(at), v))
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		alts, ok := s[key].([]interface{})
		if !ok {
			continue
		}
		matches := 0
		for _, alt := range alts {
			if len(validateSchema(root, alt, v, at)) == 0 {
				matches++
			}
		}
		if matches == 0 || (key == "oneOf" && matches > 1) {
			errs = append(errs, fmt.Sprintf("%s: must match %s %s of the alternatives", where(at),
				map[string]string{"anyOf": "at least", "oneOf": "exactly"}[key], "one"))
		}
	}
	switch t := v.(type) {
	case string:
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: bad pattern %q: %v", where(at), p, err))
			} else if !re.MatchString(t) {
				errs = append(errs, fmt.Sprintf("%s: %q does not match pattern %q", where(at), t, p))
			}
		}
		if n, ok := s["minLength"].(float64); ok && float64(len(t)) < n {
			errs = append(errs, fmt.Sprintf("%s: shorter than %v", where(at), n))
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len(t)) > n {
			errs = append(errs, fmt.Sprintf("%s: longer than %v", where(at), n))
		}
	case float64:
		if n, ok := s["minimum"].(float64); ok && t < n {
			errs = append(errs, fmt.Sprintf("%s: %v is less than %v", where(at), t, n))
		}
		if n, ok := s["maximum"].(float64); ok && t > n {
			errs = append(errs, fmt.Sprintf("%s: %v is greater than %v", where(at), t, n))
		}
	case []interface{}:
		if n, ok := s["minItems"].(float64); ok && float64(len(t)) < n {
			errs = append(errs, fmt.Sprintf("%s: fewer than %v items", where(at), n))
		}
		if n, ok := s["maxItems"].(float64); ok && float64(len(t)) > n {
			errs = append(errs, fmt.Sprintf("%s: more than %v items", where(at), n))
		}
		if items, ok := s["items"]; ok {
			for i, x := range t {
				errs = append(errs, validateSchema(root, items, x, fmt.Sprintf("%s.%d", at, i))...)
			}
		}
	case map[string]interface{}:
		if req, ok := s["required"].([]interface{}); ok {
			for _, r := range req {
				if _, present := t[r.(string)]; !present {
					errs = append(errs, fmt.Sprintf("%s: missing property %q", where(at), r))
				}
			}
		}
		props, _ := s["properties"].(map[string]interface{})
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := at + "." + k
			if at == "" {
				child = k
			}
			if ps, ok := props[k]; ok {
				errs = append(errs, validateSchema(root, ps, t[k], child)...)
			} else if ap, ok := s["additionalProperties"]; ok {
				if b, isBool := ap.(bool); isBool && !b {
					errs = append(errs, fmt.Sprintf("%s: additional property %q is not allowed", where(at), k))
				} else {
					errs = append(errs, validateSchema(root, ap, t[k], child)...)
				}
			}
		}
	}
	return errs
}

func where(at string) string {
	if at == "" {
		return "(root)"
	}
	return at
}

func resolveRef(root interface{}, ref string) (interface{}, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	cur := root
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

func jsonType(v interface{}) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if t == float64(int64(t)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []interface{}:
		return "array"
	case map[string]interface{}:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(want interface{}, v interface{}) bool {
	got := jsonType(v)
	check := func(w string) bool { return w == got || (w == "number" && got == "integer") }
	switch t := want.(type) {
	case string:
		return check(t)
	case []interface{}:
		for _, w := range t {
			if s, ok := w.(string); ok && check(s) {
				return true
			}
		}
	}
	return false
}
