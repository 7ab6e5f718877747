package main

import (
	"strings"
	"testing"

	yaml "gopkg.in/yaml.v2"
)

const fixture = "testdata/chart"

func renderFixture(t *testing.T, sets ...string) (map[string]interface{}, string) {
	t.Helper()
	out, err := render(fixture, "ns1", "rel", "v1.29.3+k3s1", false, nil,
		append([]string{"nested.required=ok"}, sets...), []string{"monitoring.coreos.com/v1"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var doc map[string]interface{}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	return doc, out
}

func TestHelmFunctionsAndObjects(t *testing.T) {
	doc, out := renderFixture(t)
	want := map[string]interface{}{
		"kind": "Fixture", "replicasGT1": true, "replicasType": "float64",
		"json": []interface{}{"x", "y"}, "tpl": "release rel", "required": "ok", "lookup": 0,
		"hasMonitoring": true, "kubeMinor": 29, "namespace": "ns1",
		"template": "fixture/templates/all.yaml", "appVersion": 4.5, "missing": "",
		"globbed": "files/a.json files/b.json", "fromYaml": "v",
	}
	for k, v := range want {
		got := doc[k]
		if gs, ok := got.([]interface{}); ok {
			if len(gs) != 2 || gs[0] != "x" {
				t.Errorf("%s = %v, want %v", k, got, v)
			}
			continue
		}
		if got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if !strings.Contains(out, "app: demo\n  chart: fixture-1.2.3") {
		t.Errorf("include | nindent did not produce the labels:\n%s", out)
	}
	if !strings.Contains(out, "# Source: fixture/templates/all.yaml") || strings.Contains(out, "empty.yaml") {
		t.Errorf("want a Source header for all.yaml and none for the empty template:\n%s", out)
	}
	if fa, ok := doc["fileA"].(map[interface{}]interface{}); !ok || fa["a"] != 1 {
		t.Errorf("fileA = %#v", doc["fileA"])
	}
}

func TestValuesMergeLikeHelm(t *testing.T) {
	doc, _ := renderFixture(t, "nested.drop=null", "replicas=3")
	nested := doc["nested"].(map[interface{}]interface{})
	if _, present := nested["drop"]; present || nested["keep"] != "a" {
		t.Errorf("null must delete nested.drop and keep nested.keep: %v", nested)
	}
}

func TestFailuresAreErrors(t *testing.T) {
	cases := []struct {
		sets []string
		want string
	}{
		{[]string{"fail=true", "nested.required=ok"}, "asked to fail"},
		{nil, "nested.required is required"},
		{[]string{"nested.required=ok", "nested.typo=1"}, `additional property "typo" is not allowed`},
		{[]string{"nested.required=ok", "replicas=9"}, "9 is greater than 5"},
		{[]string{"nested.required=ok", "mode=c"}, "is not one of"},
		{[]string{"nested.required=ok", "name=Demo"}, "does not match pattern"},
		{[]string{"nested.required=ok", "replicas=two"}, "got string, want integer"},
	}
	for _, c := range cases {
		_, err := render(fixture, "ns", "rel", "v1.30.0", false, nil, c.sets, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sets %v: error %v, want one containing %q", c.sets, err, c.want)
		}
	}
}

func TestBadKubeVersionIsRefused(t *testing.T) {
	if _, err := render(fixture, "ns", "rel", "latest", false, nil, []string{"nested.required=ok"}, nil); err == nil {
		t.Error("want an error for --kube-version latest")
	}
}

func TestLookupAnswersFromGivenObjects(t *testing.T) {
	lookupObjects = []map[string]interface{}{{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]interface{}{"name": "name", "namespace": "ns"},
	}}
	defer func() { lookupObjects = nil }()
	doc, _ := renderFixture(t)
	if doc["lookup"] != 3 {
		t.Errorf("lookup found %v keys, want the 3 of the given Secret", doc["lookup"])
	}
}

func TestChartKubeVersionIsEnforced(t *testing.T) {
	if _, err := render("../../gpupack", "ns", "rel", "v1.25.9", false, nil, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "incompatible with Kubernetes v1.25.9") {
		t.Errorf("gpupack on v1.25.9: error %v, want the kubeVersion refusal", err)
	}
	if _, err := render("../../gpupack", "ns", "rel", "v1.31.1+k3s1", false, nil, nil, nil); err != nil {
		t.Errorf("gpupack on v1.31.1+k3s1: %v", err)
	}
}
