package cluster

// The bind-throughput benchmark (docs/e2e.md "Bind throughput"): the same burst of pods through
// gpupack (8 GiB each, the gpupack profile: filter, prioritize and bind through the extender,
// fences on) and through a plain kube-scheduler (no extender; each pod asks one unit of a
// node-level extended resource), in one run on the same nodes, with the extender's bind latency
// histogram scraped from its /metrics. It fails when a bind is not fenced or opens connections
// to the API server as it goes (the keep-alive pool), not on the timings, which a shared
// machine makes noisy; it logs them side by side.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

const (
	plainSchedulerName = "gpupack-e2e-plain"
	benchSlots         = "example.com/bench-slots" // the plain pods' node-level extended resource
)

// benchPods is GPUPACK_BENCH_PODS (default 100: cheap enough for the suite).
func benchPods(t *testing.T) int {
	n, err := envCount("GPUPACK_BENCH_PODS", 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBindThroughput(t *testing.T) {
	n := benchPods(t)
	tb.startPlainScheduler(t)
	tb.addBenchSlots(t, n)

	before := tb.extenderSamples(t)
	apiBefore := tb.apiServerSamples(t)
	gp := tb.createNamespace(t, "bench-gpupack")
	specs := make([]podSpec, n)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("g%d", i), memory: "8Gi"}
	}
	start := time.Now()
	tb.createPods(t, gp, specs, 8, 0, nil)
	tb.waitBoundEvery(t, gp, n, 5*time.Minute, 100*time.Millisecond)
	gpupack := time.Since(start)
	after := tb.extenderSamples(t)
	apiAfter := tb.apiServerSamples(t)

	pn := tb.createNamespace(t, "bench-plain")
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("k%d", i), schedulerName: plainSchedulerName, slots: 1}
	}
	start = time.Now()
	tb.createPods(t, pn, specs, 8, 0, nil)
	tb.waitBoundEvery(t, pn, n, 5*time.Minute, 100*time.Millisecond)
	plain := time.Since(start)

	delta := func(sample string) float64 { return after[sample] - before[sample] }
	binds := delta(`gpupack_bind_requests_total{result="success"}`)
	opened := delta(`gpupack_kube_connections_opened_total{client="bind"}`)
	t.Logf("%d pods created and bound: gpupack %.2fs (%.1f pods/s), plain kube-scheduler %.2fs (%.1f pods/s): %.2fx",
		n, gpupack.Seconds(), float64(n)/gpupack.Seconds(), plain.Seconds(), float64(n)/plain.Seconds(),
		gpupack.Seconds()/plain.Seconds())
	t.Logf("bind: %.0f calls, mean %.1f ms; the bind client opened %.0f connections (%.3f per bind)\n%s",
		delta(`gpupack_extender_request_duration_seconds_count{verb="bind"}`),
		1000*delta(`gpupack_extender_request_duration_seconds_sum{verb="bind"}`)/
			delta(`gpupack_extender_request_duration_seconds_count{verb="bind"}`),
		opened, opened/binds, bindHistogram(before, after))
	t.Logf("the API server's own time per call during the gpupack burst (apiserver_request_duration_seconds):\n%s",
		apiServerCalls(apiBefore, apiAfter))
	if binds < float64(n) {
		t.Errorf("the extenders counted %.0f successful Bindings for %d pods", binds, n)
	}
	// One connection per call was 4 per bind (fence read, fresh read, fence write, Binding). With
	// the pool a burst opens about one per 4–5 binds, as binds in flight outgrow the idle ones;
	// the bound sits well above that noise and well below the regression.
	if opened > binds {
		t.Errorf("the bind path opened %.0f connections for %.0f binds: calls do not reuse kept-alive connections", opened, binds)
	}
	for _, s := range tb.liveSchedulers() {
		if up, err := tb.scrape(s.metricsPort, "gpupack_bind_fence_up"); err != nil || up != 1 {
			t.Errorf("extender on :%d: gpupack_bind_fence_up = %v (%v): binds are not fenced", s.metricsPort, up, err)
		}
		if detail, ok := readyz(s.metricsPort); !ok {
			t.Errorf("extender on :%d: /readyz: %s", s.metricsPort, detail)
		}
	}
	tb.checkLedger(t)
}

// bindHistogram is the bind verb's latency histogram between two scrapes, one line per bucket.
func bindHistogram(before, after map[string]float64) string {
	const prefix = `gpupack_extender_request_duration_seconds_bucket{verb="bind",le="`
	type bucket struct {
		le    float64
		label string
		count float64
	}
	var buckets []bucket
	for sample, v := range after {
		if label, ok := strings.CutPrefix(sample, prefix); ok {
			label = strings.TrimSuffix(label, `"}`)
			le, err := strconv.ParseFloat(label, 64)
			if err != nil {
				continue // +Inf parses; anything else is not a bucket of ours
			}
			buckets = append(buckets, bucket{le, label, v - before[sample]})
		}
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].le < buckets[j].le })
	var out strings.Builder
	prev := 0.0
	for _, b := range buckets {
		fmt.Fprintf(&out, "  le %-8s %6.0f  (+%.0f)\n", b.label, b.count, b.count-prev)
		prev = b.count
	}
	return out.String()
}

// apiServerSamples scrapes kube-apiserver's /metrics with the admin credentials (none against an
// existing cluster that hides them: the table is then empty).
func (b *bed) apiServerSamples(t *testing.T) map[string]float64 {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	body, err := b.kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(c)
	if err != nil {
		t.Logf("kube-apiserver /metrics: %v", err)
		return nil
	}
	samples, err := parseMetrics(body)
	if err != nil {
		t.Logf("kube-apiserver /metrics: %v", err)
	}
	return samples
}

// apiServerCalls is a table of the calls the bind path and the scheduler make, with how many
// there were between two scrapes and their mean duration inside the API server.
func apiServerCalls(before, after map[string]float64) string {
	type call struct{ verb, resource, subresource string }
	sums, counts := map[call]float64{}, map[call]float64{}
	label := func(sample, name string) string {
		i := strings.Index(sample, name+`="`)
		if i < 0 {
			return ""
		}
		rest := sample[i+len(name)+2:]
		return rest[:strings.IndexByte(rest, '"')]
	}
	for sample, v := range after {
		for suffix, into := range map[string]map[call]float64{"_sum{": sums, "_count{": counts} {
			if !strings.HasPrefix(sample, "apiserver_request_duration_seconds"+suffix) {
				continue
			}
			k := call{label(sample, "verb"), label(sample, "resource"), label(sample, "subresource")}
			if k.resource == "pods" || k.resource == "leases" || k.resource == "events" {
				into[k] += v - before[sample]
			}
		}
	}
	var keys []call
	for k, n := range counts {
		if n > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var out strings.Builder
	for _, k := range keys {
		name := k.resource
		if k.subresource != "" {
			name += "/" + k.subresource
		}
		fmt.Fprintf(&out, "  %-7s %-14s %6.0f calls, mean %7.1f ms\n", k.verb, name, counts[k], 1000*sums[k]/counts[k])
	}
	return out.String()
}

// liveSchedulers are the scheduler replicas whose extender still runs (a scenario may kill one).
func (b *bed) liveSchedulers() []*schedulerPod {
	var out []*schedulerPod
	for _, s := range b.scheduler {
		if !s.extender.exited() {
			out = append(out, s)
		}
	}
	return out
}

// extenderSamples sums every sample over the live extenders' /metrics.
func (b *bed) extenderSamples(t *testing.T) map[string]float64 {
	t.Helper()
	sum := map[string]float64{}
	for _, s := range b.liveSchedulers() {
		samples, err := metricsOf(s.metricsPort)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range samples {
			sum[k] += v
		}
	}
	return sum
}

func readyz(port int) (string, bool) {
	r, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		return err.Error(), false
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return fmt.Sprintf("%d %s", r.StatusCode, strings.TrimSpace(string(body))), r.StatusCode == 200
}

// addBenchSlots gives every untainted Node `n` units of the plain pods' extended resource, as a
// device plugin would, and takes them away when the test ends.
func (b *bed) addBenchSlots(t *testing.T, n int) {
	t.Helper()
	set := func(value any) error {
		c, cancel := ctx(20 * time.Second)
		defer cancel()
		patch := fmt.Sprintf(`{"status":{"capacity":{%q:%s},"allocatable":{%q:%s}}}`, benchSlots, value, benchSlots, value)
		for _, name := range b.nodes {
			node, err := b.kc.CoreV1().Nodes().Get(c, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(node.Spec.Taints) > 0 {
				continue
			}
			if _, err := b.kc.CoreV1().Nodes().Patch(c, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("node %s: %v", name, err)
			}
		}
		return nil
	}
	if err := set(fmt.Sprintf("%q", strconv.Itoa(n))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set("null"); err != nil {
			t.Error(err)
		}
	})
}

// startPlainScheduler runs a kube-scheduler with the chart's configuration minus the extender,
// as profile plainSchedulerName, without leader election, until the test ends.
func (b *bed) startPlainScheduler(t *testing.T) {
	t.Helper()
	raw, err := b.configMapData(b.saScheduler, "scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sc map[string]any
	if err := yaml.Unmarshal([]byte(raw), &sc); err != nil {
		t.Fatal(err)
	}
	delete(sc, "extenders")
	sc["profiles"].([]any)[0].(map[string]any)["schedulerName"] = plainSchedulerName
	sc["profiles"] = sc["profiles"].([]any)[:1]
	sc["leaderElection"] = map[string]any{"leaderElect": false}
	sc["clientConnection"] = map[string]any{"kubeconfig": b.schedulerKubeconfig}
	path := filepath.Join(b.dir, "scheduler-plain", "scheduler-config.yaml")
	if err := writeYAML(path, sc); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	args := mapArgs(b.scheduler[0].kubeSchedArgs, func(a string) string {
		switch {
		case strings.HasPrefix(a, "--config="):
			return "--config=" + path
		case strings.HasPrefix(a, "--secure-port="):
			return fmt.Sprintf("--secure-port=%d", port)
		}
		return ""
	})
	p, err := startProc(b.logDir, "kube-scheduler-plain", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(5 * time.Second) })
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if err := waitFor(60*time.Second, 100*time.Millisecond, "plain kube-scheduler /readyz", func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("plain kube-scheduler exited: %s", p.tail(15))
		}
		r, err := insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false, err
		}
		r.Body.Close()
		return r.StatusCode == 200, nil
	}); err != nil {
		t.Fatal(err)
	}
}
