package cluster

// The scenarios, in order (they share one bed; each uses its own namespace). Every scenario
// ends with checkLedger: Σ caps ≤ capacity per device from the API's own view, every bound
// gpupack pod carries its allocation, and no pod of the scenario is lost.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

const allocationKey = "gpupack.io/allocation"

// The env the webhook injects (docs/webhook.md), each read from an annotation the extender writes.
var webhookEnv = []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
	"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_CLIENT_PRIORITY"}

type podSpec struct {
	name        string
	memory      string // gpupack.io/gpu-memory, "" for whole devices
	gpus        int    // gpupack.io/gpu, 0 to leave it out
	compute     string // gpupack.io/gpu-compute (percent of each device's SMs), "" to leave it out
	annotations map[string]string
	reservedFor string // toleration + nodeSelector for a reserved node (taint value)
	env         []corev1.EnvVar
	// schedulerName and `slots` units of benchSlots: a pod for the plain kube-scheduler.
	schedulerName string
	slots         int
}

// createNamespace creates the scenario's namespace (`base`, plus a run suffix on an existing
// cluster) and returns its name.
func (b *bed) createNamespace(t *testing.T, base string) string {
	t.Helper()
	name := base + b.nsSuffix
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	if _, err := b.kc.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	b.namespaces = append(b.namespaces, name)
	// The scenarios share the nodes: each one's pods go when it ends, so the next finds the
	// devices free again (through the extender's watch: deletion releases memory).
	t.Cleanup(func() { b.deletePods(t, name) })
	// Without kube-controller-manager nobody creates the default ServiceAccount, and the
	// ServiceAccount admission plugin refuses every pod; a cluster's controller may be first.
	_, err := b.kc.CoreV1().ServiceAccounts(name).Create(c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("default ServiceAccount in %s: %v", name, err)
	}
	return name
}

// deletePods deletes every pod of `ns` with grace 0 (no kubelet confirms a graceful delete)
// and waits until the API lists none.
func (b *bed) deletePods(t *testing.T, ns string) {
	t.Helper()
	c, cancel := ctx(30 * time.Second)
	defer cancel()
	zero := int64(0)
	if err := b.kc.CoreV1().Pods(ns).DeleteCollection(c, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Errorf("delete the pods of %s: %v", ns, err)
		return
	}
	if err := waitFor(30*time.Second, 250*time.Millisecond, "pods of "+ns+" gone", func() (bool, error) {
		pods, err := b.listPods(ns)
		return err == nil && len(pods) == 0, err
	}); err != nil {
		t.Error(err)
	}
}

func (b *bed) podObject(ns string, p podSpec) *corev1.Pod {
	limits := corev1.ResourceList{}
	if p.memory != "" {
		limits[resourceMemory] = resource.MustParse(p.memory)
	}
	if p.gpus > 0 {
		limits[resourceGpu] = *resource.NewQuantity(int64(p.gpus), resource.DecimalSI)
	}
	if p.compute != "" {
		limits[resourceCompute] = resource.MustParse(p.compute)
	}
	if p.slots > 0 {
		limits[benchSlots] = *resource.NewQuantity(int64(p.slots), resource.DecimalSI)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Annotations: p.annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: podImage, Env: p.env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   limits,
			},
		}}},
	}
	pod.Spec.SchedulerName = p.schedulerName
	if p.reservedFor != "" {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: reservedTaint, Operator: corev1.TolerationOpEqual, Value: p.reservedFor, Effect: corev1.TaintEffectNoSchedule}}
		pod.Spec.NodeSelector = map[string]string{"reserved": p.reservedFor}
	}
	return pod
}

func (b *bed) createPod(t *testing.T, ns string, p podSpec) *corev1.Pod {
	t.Helper()
	c, cancel := ctx(15 * time.Second)
	defer cancel()
	created, err := b.kc.CoreV1().Pods(ns).Create(c, b.podObject(ns, p), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, p.name, err)
	}
	return created
}

// createPods creates pods from `workers` goroutines (a burst, as a Job controller would); `after`
// runs once `trigger` pods exist.
func (b *bed) createPods(t *testing.T, ns string, specs []podSpec, workers, trigger int, after func()) {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	created := 0
	next := make(chan podSpec)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				c, cancel := ctx(20 * time.Second)
				_, err := b.kc.CoreV1().Pods(ns).Create(c, b.podObject(ns, p), metav1.CreateOptions{})
				cancel()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", p.name, err))
				}
				created++
				fire := after != nil && created == trigger
				mu.Unlock()
				if fire {
					after()
				}
			}
		}()
	}
	for _, p := range specs {
		next <- p
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d pods not created, first: %s", len(errs), errs[0])
	}
}

func (b *bed) listPods(ns string) ([]corev1.Pod, error) {
	c, cancel := ctx(20 * time.Second)
	defer cancel()
	l, err := b.kc.CoreV1().Pods(ns).List(c, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitBound waits until every pod of `ns` has spec.nodeName, and fails naming the pods that do not.
func (b *bed) waitBound(t *testing.T, ns string, want int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	return b.waitBoundEvery(t, ns, want, timeout, 500*time.Millisecond)
}

// waitBoundEvery is waitBound looking every `every`.
func (b *bed) waitBoundEvery(t *testing.T, ns string, want int, timeout, every time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	start := time.Now()
	err := waitFor(timeout, every, fmt.Sprintf("%d pods of %s bound", want, ns), func() (bool, error) {
		var err error
		if pods, err = b.listPods(ns); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return len(pods) == want && bound == want, nil
	})
	if err != nil {
		t.Fatalf("%v; %d of %d listed, unbound e.g. %v", err, len(pods), want, b.unboundExamples(ns, pods))
	}
	t.Logf("%d pods of %s bound by the real kube-scheduler in %.1fs", want, ns, time.Since(start).Seconds())
	return pods
}

// eventsOf lists a pod's Events the way `kubectl describe pod` does (field selector on
// involvedObject), through the core/v1 API kube-scheduler's events.k8s.io Events are also served on.
func (b *bed) eventsOf(ns, pod string) ([]corev1.Event, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	sel := fields.Set{"involvedObject.name": pod, "involvedObject.namespace": ns, "involvedObject.kind": "Pod"}.AsSelector().String()
	l, err := b.kc.CoreV1().Events(ns).List(c, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// unboundExamples names up to five pods of the list without a node, each with its last
// scheduling event, for a failure message.
func (b *bed) unboundExamples(ns string, pods []corev1.Pod) []string {
	var pending []string
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			pending = append(pending, p.Name+": "+b.lastSchedulingEvent(ns, p.Name))
		}
	}
	if len(pending) > 5 {
		pending = pending[:5]
	}
	return pending
}

func (b *bed) lastSchedulingEvent(ns, pod string) string {
	evs, err := b.eventsOf(ns, pod)
	if err != nil {
		return err.Error()
	}
	last := "no events"
	for _, e := range evs {
		last = e.Reason + ": " + e.Message
	}
	return last
}

// ---- the ledger, from the API's own view -------------------------------------------------------

type allocation struct {
	V          int    `json:"v"`
	Node       string `json:"node"`
	Containers []struct {
		Name    string `json:"name"`
		Devices []struct {
			UUID       string `json:"uuid"`
			MemMiB     int64  `json:"memMiB"`
			LimitMiB   int64  `json:"limitMiB"`   // a burstable container's ceiling; 0 without one
			ComputePct *int64 `json:"computePct"` // nil in allocations written before compute shares
		} `json:"devices"`
	} `json:"containers"`
}

type device struct {
	node     string
	capacity int64
}

// gpuDevices: every device (whole GPU not in MIG mode, or MIG instance) per the GPUNodes.
func (b *bed) gpuDevices() (map[string]device, error) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	list, err := b.dyn.Resource(gpuNodesGVR).List(c, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]device{}
	for _, g := range list.Items {
		devices, _, _ := unstructuredSlice(g.Object, "status", "devices")
		for _, d := range devices {
			dm := d.(map[string]any)
			if mig, _ := dm["migEnabled"].(bool); mig {
				instances, _ := dm["migInstances"].([]any)
				for _, mi := range instances {
					m := mi.(map[string]any)
					out[m["uuid"].(string)] = device{node: g.GetName(), capacity: toInt(m["memoryMiB"])}
				}
				continue
			}
			out[dm["uuid"].(string)] = device{node: g.GetName(), capacity: toInt(dm["memoryMiB"])}
		}
	}
	return out, nil
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return -1
}

func isGpupackPod(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if _, ok := c.Resources.Limits[resourceMemory]; ok {
			return true
		}
		if _, ok := c.Resources.Limits[resourceGpu]; ok {
			return true
		}
	}
	return false
}

// checkLedger asserts the invariant over every pod of the cluster and returns allocated MiB per
// device.
func (b *bed) checkLedger(t *testing.T) map[string]int64 {
	t.Helper()
	devices, err := b.gpuDevices()
	if err != nil {
		t.Fatalf("list GPUNodes: %v", err)
	}
	pods, err := b.listPods("")
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	used := map[string]int64{}
	compute := map[string]int64{}
	holders := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if !isGpupackPod(p) || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := p.Namespace + "/" + p.Name
		raw, ok := p.Annotations[allocationKey]
		if !ok {
			t.Errorf("%s is bound to %s without %s", key, p.Spec.NodeName, allocationKey)
			continue
		}
		var a allocation
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Errorf("%s: %s is not JSON: %v", key, allocationKey, err)
			continue
		}
		if a.V != 1 || a.Node != p.Spec.NodeName {
			t.Errorf("%s: allocation v=%d node=%q, bound to %q", key, a.V, a.Node, p.Spec.NodeName)
		}
		for _, c := range a.Containers {
			for _, d := range c.Devices {
				dev, ok := devices[d.UUID]
				if !ok || dev.node != p.Spec.NodeName {
					t.Errorf("%s: device %s is not a device of node %s", key, d.UUID, p.Spec.NodeName)
					continue
				}
				used[d.UUID] += d.MemMiB
				share := int64(-1)
				if d.ComputePct != nil {
					share = *d.ComputePct
					compute[d.UUID] += share
				}
				holders[d.UUID] = append(holders[d.UUID], fmt.Sprintf("%s=%dMiB/%d%%", key, d.MemMiB, share))
			}
		}
	}
	for uuid, u := range used {
		if u > devices[uuid].capacity {
			t.Errorf("device %s on %s: Σ caps %d MiB > capacity %d MiB: %v", uuid, devices[uuid].node, u, devices[uuid].capacity, holders[uuid])
		}
		if compute[uuid] > 100 {
			t.Errorf("device %s on %s: Σ compute shares %d %% > 100 %%: %v", uuid, devices[uuid].node, compute[uuid], holders[uuid])
		}
	}
	return used
}

// ---- scenarios -----------------------------------------------------------------------------------

// mixedWorkload: per 36 pods, 1 whole device, 6 two-device pods, 6 MIG pods and 23 fractions.
// Every non-MIG pod says `device-kind: gpu`: with the default `any`, fractions of 10Gi fill the
// 1g.10gb instances exactly (the tightest fit), and the MIG pods that can go nowhere else starve
// (seen against the real kube-scheduler: 216 pods, 30 instances of 1g.10gb, about ten MIG pods
// left Pending). Per 216 pods: 36 MIG pods of 5Gi need 18 of the 30 instances (two per 10Gi).
func mixedWorkload(prefix string, n int) []podSpec {
	var out []podSpec
	fractions := []string{"2Gi", "4Gi", "6Gi", "8Gi", "10Gi"}
	gpuOnly := func() map[string]string { return map[string]string{"gpupack.io/device-kind": "gpu"} }
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		switch {
		case i%36 == 35: // a whole device, exclusively
			out = append(out, podSpec{name: name + "-whole", gpus: 1, annotations: gpuOnly()})
		case i%6 == 1: // two devices, 4Gi on each
			out = append(out, podSpec{name: name + "-multi", memory: "8Gi", gpus: 2, annotations: gpuOnly()})
		case i%6 == 4: // a MIG instance of a given profile
			out = append(out, podSpec{name: name + "-mig", memory: "5Gi",
				annotations: map[string]string{"gpupack.io/device-kind": "mig", "gpupack.io/mig-profile": "1g.10gb"}})
		default: // a fraction of one device
			out = append(out, podSpec{name: name + "-frac", memory: fractions[i%len(fractions)], annotations: gpuOnly()})
		}
	}
	return out
}

// watchBindings records, for every pod of `ns`, whether the first version of it that has
// spec.nodeName already carries the allocation annotation (one Binding wrote both). The watch
// resumes from its last resourceVersion when the API server closes it: kube-apiserver's watch
// cache drops a watcher that falls behind a burst ("Forcing pods watcher close due to
// unresponsiveness"), which a shared 2-core machine provokes. If it cannot resume (410 Gone),
// ended says why and check reports that instead of one miss per pod.
type bindingWatch struct {
	mu        sync.Mutex
	firstSeen map[string]bool
	ended     error
	stop      context.CancelFunc
	done      chan struct{}
}

func (b *bed) watchBindings(t *testing.T, ns string) *bindingWatch {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	// A RetryWatcher needs a concrete starting version: the empty namespace's list gives one.
	list, err := b.kc.CoreV1().Pods(ns).List(c, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("list pods of %s: %v", ns, err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(c, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(c context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return b.kc.CoreV1().Pods(ns).Watch(c, o)
		}})
	if err != nil {
		cancel()
		t.Fatalf("watch pods of %s: %v", ns, err)
	}
	bw := &bindingWatch{firstSeen: map[string]bool{}, stop: func() { w.Stop(); cancel() }, done: make(chan struct{})}
	go func() {
		defer close(bw.done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				bw.mu.Lock()
				bw.ended = apierrors.FromObject(ev.Object)
				bw.mu.Unlock()
				continue
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			bw.mu.Lock()
			if _, seen := bw.firstSeen[p.Name]; !seen {
				_, has := p.Annotations[allocationKey]
				bw.firstSeen[p.Name] = has
			}
			bw.mu.Unlock()
		}
	}()
	return bw
}

func (bw *bindingWatch) check(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	// The watch trails the list a little, more after a resume: give it a bounded moment to catch up.
	_ = waitFor(30*time.Second, 100*time.Millisecond, "watch caught up", func() (bool, error) {
		bw.mu.Lock()
		defer bw.mu.Unlock()
		return len(bw.firstSeen) >= len(pods) || bw.ended != nil, nil
	})
	bw.stop()
	<-bw.done
	bw.mu.Lock()
	defer bw.mu.Unlock()
	var unseen []string
	for _, p := range pods {
		has, seen := bw.firstSeen[p.Name]
		if !seen {
			unseen = append(unseen, p.Name)
		} else if !has {
			t.Errorf("%s: bound without %s in the same write (the Binding must carry it)", p.Name, allocationKey)
		}
	}
	if n := len(unseen); n > 0 {
		if n > 5 {
			unseen = append(unseen[:5], "…")
		}
		t.Errorf("the watch never saw %d of %d bound pods bound (watch ended early: %v), e.g. %v", n, len(pods), bw.ended, unseen)
	}
}

// checkWebhookEnv: the admitted pod carries gpupack's scheduler and, in every container, the
// downward-API env whose annotations the extender wrote in the Binding.
func (b *bed) checkWebhookEnv(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.Spec.SchedulerName != b.schedName {
		t.Errorf("%s: schedulerName %q, want %q (set by the webhook)", p.Name, p.Spec.SchedulerName, b.schedName)
	}
	for _, c := range p.Spec.Containers {
		for _, name := range webhookEnv {
			var found *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == name {
					if found != nil {
						t.Errorf("%s/%s: %s twice", p.Name, c.Name, name)
					}
					found = &c.Env[i]
				}
			}
			if found == nil || found.ValueFrom == nil || found.ValueFrom.FieldRef == nil || found.Value != "" {
				t.Errorf("%s/%s: %s is not a downward-API fieldRef: %+v", p.Name, c.Name, name, found)
				continue
			}
			path := found.ValueFrom.FieldRef.FieldPath
			key := strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")
			if key == path || !strings.HasPrefix(key, "gpupack.io/") {
				t.Errorf("%s/%s: %s reads %q, want metadata.annotations['gpupack.io/…']", p.Name, c.Name, name, path)
				continue
			}
			if p.Spec.NodeName != "" && p.Annotations[key] == "" {
				t.Errorf("%s/%s: %s reads annotation %s, which the bound pod does not carry (annotations: %v)", p.Name, c.Name, name, key, sortedKeys(p.Annotations))
			}
		}
	}
}

// Whole-device pods arrive after the fractions and two-device pods have touched most devices
// (the two-device pods alone touch 72 device slots of 36 devices): one may find no empty device.
// Then it must be accounted for, Pending with gpupack's reason in a FailedScheduling Event;
// every other pod must bind.
func TestPackMixedPodsWithRealKubeScheduler(t *testing.T) {
	const n = 216
	ns := tb.createNamespace(t, "pack")
	bw := tb.watchBindings(t, ns)
	specs := mixedWorkload("p", n)
	start := time.Now()
	tb.createPods(t, ns, specs, 8, 0, nil)
	t.Logf("%d pods created through the webhook in %.1fs", n, time.Since(start).Seconds())
	isWhole := func(p *corev1.Pod) bool { return strings.HasSuffix(p.Name, "-whole") }
	// 6 minutes: about 2.5 when the suite has 2 cores to itself; a machine shared with builds
	// starves the extender past kube-scheduler's 5s httpTimeout, and each timeout backs a pod off.
	bound, waiting := tb.waitSettled(t, ns, n, 6*time.Minute, isWhole, "empty device")
	bw.check(t, bound)
	used := tb.checkLedger(t)
	pods, err := tb.listPods(ns)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i := range pods {
		tb.checkWebhookEnv(t, &pods[i])
		if pods[i].Spec.NodeName != "" {
			kinds[pods[i].Name[strings.LastIndex(pods[i].Name, "-")+1:]]++
		}
	}
	var total int64
	for _, u := range used {
		total += u
	}
	t.Logf("bound %v on %d devices, %d MiB allocated; Pending with gpupack's reason: %v", kinds, len(used), total, waiting)
}

// waitSettled waits until every pod of `ns` is bound, except that a pod for which mayWait is true
// may instead be Pending with a FailedScheduling Event whose message contains `reason`. It
// returns the bound pods and, per waiting pod, its Event's message.
func (b *bed) waitSettled(t *testing.T, ns string, want int, timeout time.Duration, mayWait func(*corev1.Pod) bool, reason string) ([]corev1.Pod, map[string]string) {
	t.Helper()
	var pods, bound []corev1.Pod
	var waiting map[string]string
	start := time.Now()
	err := waitFor(timeout, time.Second, fmt.Sprintf("%d pods of %s bound or refused", want, ns), func() (bool, error) {
		var err error
		if pods, err = b.listPods(ns); err != nil {
			return false, err
		}
		bound, waiting = nil, map[string]string{}
		for i := range pods {
			p := &pods[i]
			if p.Spec.NodeName != "" {
				bound = append(bound, *p)
				continue
			}
			if !mayWait(p) {
				return false, nil
			}
			evs, err := b.eventsOf(ns, p.Name)
			if err != nil {
				return false, err
			}
			ev := findEvent(evs, "FailedScheduling")
			if ev == nil || !strings.Contains(ev.Message, reason) {
				return false, nil
			}
			waiting[p.Name] = ev.Message
		}
		return len(pods) == want, nil
	})
	if err != nil {
		t.Fatalf("%v; %d of %d listed, unsettled e.g. %v", err, len(pods), want, b.unboundExamples(ns, pods))
	}
	for name, msg := range waiting {
		// kube-scheduler formats the event text as printf: a '%' in a verdict would come out as "%!c(MISSING)".
		if strings.Contains(msg, "%!") {
			t.Errorf("%s: kube-scheduler's event garbles the extender's message: %q", name, msg)
		}
	}
	t.Logf("%d pods of %s bound by the real kube-scheduler, %d refused, in %.1fs", len(bound), ns, len(waiting), time.Since(start).Seconds())
	return bound, waiting
}

// The chart's webhook reviews every pod CREATE, through the real API server: GPU devices and caps
// come only from the scheduler's allocation, so a pod may not set them itself, whether or not it
// asks for gpupack resources (docs/security.md); a value that gives no device is the pod's to say.
// A gpupack pod that sets none of them gets gpupack's env and keeps its own.
func TestWebhookRefusesDeviceEnvThePodSetsItself(t *testing.T) {
	ns := tb.createNamespace(t, "webhook")
	why := " itself; GPU devices and caps come only from the scheduler's allocation"
	for _, probe := range []struct {
		what    string
		pod     podSpec
		message string
	}{
		{"a gpupack pod raising its own cap",
			podSpec{name: "sneaky", memory: "3Gi", env: []corev1.EnvVar{{Name: "NVIDIA_GPU_MEMORY_LIMIT", Value: "999999"}}},
			`container "main" (spec.containers[0]) sets NVIDIA_GPU_MEMORY_LIMIT` + why},
		{"a pod with no gpupack resources taking every GPU",
			podSpec{name: "plain", env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}},
			`container "main" (spec.containers[0]) sets NVIDIA_VISIBLE_DEVICES` + why},
		{"a pod with no gpupack resources writing a scheduler annotation",
			podSpec{name: "annotated", annotations: map[string]string{"gpupack.io/c0-visible-devices": "GPU-0"}},
			`metadata.annotations["gpupack.io/c0-visible-devices"]: only the gpupack scheduler may set this annotation`},
	} {
		c, cancel := ctx(15 * time.Second)
		_, err := tb.kc.CoreV1().Pods(ns).Create(c, tb.podObject(ns, probe.pod), metav1.CreateOptions{})
		cancel()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), probe.message) {
			t.Errorf("%s: create answered %v, want 403 Forbidden with %q", probe.what, err, probe.message)
		}
	}
	void := []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"}}
	plain := tb.createPod(t, ns, podSpec{name: "no-device", env: void})
	if !reflect.DeepEqual(plain.Spec.Containers[0].Env, void) || plain.Spec.SchedulerName == tb.schedName {
		t.Errorf("a pod with no gpupack resources was changed: env %+v, schedulerName %q", plain.Spec.Containers[0].Env, plain.Spec.SchedulerName)
	}
	tb.deletePods(t, ns)

	p := tb.createPod(t, ns, podSpec{name: "keeps", memory: "3Gi",
		env: []corev1.EnvVar{{Name: "KEEP_ME", Value: "1"}, {Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "compute,utility"}}})
	tb.checkWebhookEnv(t, p)
	if kept := p.Spec.Containers[0].Env[len(webhookEnv):]; len(kept) != 2 || kept[0].Name != "KEEP_ME" || kept[1].Name != "NVIDIA_DRIVER_CAPABILITIES" {
		t.Errorf("the webhook changed the pod's own env: %+v", p.Spec.Containers[0].Env)
	}
	pods := tb.waitBound(t, ns, 1, time.Minute)
	tb.checkWebhookEnv(t, &pods[0])
	tb.checkLedger(t)
}

// waitFailedScheduling waits up to 45 s for kube-scheduler's FailedScheduling Event of the pod.
func (b *bed) waitFailedScheduling(t *testing.T, ns, pod string) *corev1.Event {
	t.Helper()
	var ev *corev1.Event
	err := waitFor(45*time.Second, 500*time.Millisecond, "FailedScheduling Event of "+ns+"/"+pod, func() (bool, error) {
		evs, err := b.eventsOf(ns, pod)
		if err != nil {
			return false, err
		}
		ev = findEvent(evs, "FailedScheduling")
		return ev != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ev.Message, "%!") {
		t.Errorf("%s/%s: kube-scheduler's event garbles the extender's message: %q", ns, pod, ev.Message)
	}
	return ev
}

func findEvent(evs []corev1.Event, reason string) *corev1.Event {
	for i := range evs {
		if evs[i].Reason == reason {
			return &evs[i]
		}
	}
	return nil
}

// The reserved node "release-1" holds two whole L40S; a third whole-device pod stays Pending
// with kube-scheduler's FailedScheduling Event carrying gpupack's reason until a holder is deleted.
func TestUnschedulableEventThenDeletionReleases(t *testing.T) {
	ns := tb.createNamespace(t, "release")
	for _, name := range []string{"hold-a", "hold-b"} {
		tb.createPod(t, ns, podSpec{name: name, gpus: 1, reservedFor: "release"})
	}
	tb.waitBound(t, ns, 2, time.Minute)
	tb.createPod(t, ns, podSpec{name: "waiter", gpus: 1, reservedFor: "release"})
	ev := tb.waitFailedScheduling(t, ns, "waiter")
	t.Logf("kubectl describe pod waiter would show: %s %s: %s", ev.Type, ev.Reason, ev.Message)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "0/") {
		t.Errorf("FailedScheduling event is not kube-scheduler's: %+v", ev)
	}
	// gpupack's verdict for release-1 (placement/verdict.cc), passed on by kube-scheduler.
	if !strings.Contains(ev.Message, "1 needs 1 empty device, node has 0") {
		t.Errorf("FailedScheduling message does not carry gpupack's reason for release-1: %q", ev.Message)
	}
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	w, _ := tb.kc.CoreV1().Pods(ns).Get(c, "waiter", metav1.GetOptions{})
	if w.Spec.NodeName != "" {
		t.Fatalf("waiter bound to %s although both devices are held", w.Spec.NodeName)
	}
	// Without a kubelet a graceful delete never completes; grace 0 is what the kubelet's
	// confirmation would end in.
	zero := int64(0)
	if err := tb.kc.CoreV1().Pods(ns).Delete(c, "hold-a", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// The deletion alone does not wake the waiter (kube-scheduler's own plugins refused the
	// other nodes and do not care about pod deletions): the chart's retryUnschedulableAfter
	// (30s, flushed every 30s) bounds the wait.
	pods := tb.waitBound(t, ns, 2, 100*time.Second)
	for _, p := range pods {
		if p.Name == "waiter" && p.Spec.NodeName != "release-1" {
			t.Errorf("waiter bound to %q", p.Spec.NodeName)
		}
	}
	tb.checkLedger(t)
}

// A compute-reserved pod and memory-only pods through the real kube-scheduler, on release-1 (two
// L40S of 48Gi, reserved for scenarios that tolerate it): two pods reserving 70 % each take one
// GPU each (70 + 70 > 100 on one); an 8Gi memory-only pod reserves its memory's share,
// ⌊100 · 8192 / 49152⌋ = 16 %, so one fits beside each reserved pod (86 %) and a third waits with
// gpupack's compute verdict although 48 − 16 = 32 GiB of each GPU are free. The ledger check sums
// every device's compute shares.
func TestComputeReservedAndMemoryOnlyPodsNeverOvercommit(t *testing.T) {
	ns := tb.createNamespace(t, "compute")
	for _, name := range []string{"reserved-a", "reserved-b"} {
		tb.createPod(t, ns, podSpec{name: name, memory: "8Gi", compute: "70", reservedFor: "release"})
	}
	tb.waitBound(t, ns, 2, time.Minute)
	for _, name := range []string{"memory-a", "memory-b"} {
		tb.createPod(t, ns, podSpec{name: name, memory: "8Gi", reservedFor: "release"})
	}
	pods := tb.waitBound(t, ns, 4, time.Minute)
	tb.createPod(t, ns, podSpec{name: "memory-c", memory: "8Gi", reservedFor: "release"})
	ev := tb.waitFailedScheduling(t, ns, "memory-c")
	// '%' reaches kube-scheduler as the full-width sign (api/extender_types.h: it formats the text as printf).
	if !strings.Contains(ev.Message, "needs 16 ％ compute, largest free share 14 ％") {
		t.Errorf("FailedScheduling does not carry gpupack's compute verdict for release-1: %q", ev.Message)
	}
	perDevice := map[string][]string{}
	for _, p := range pods {
		var a allocation
		if err := json.Unmarshal([]byte(p.Annotations[allocationKey]), &a); err != nil || len(a.Containers) != 1 {
			t.Fatalf("%s: allocation %q: %v", p.Name, p.Annotations[allocationKey], err)
		}
		d := a.Containers[0].Devices[0]
		if d.ComputePct == nil {
			t.Fatalf("%s: allocation without computePct: %s", p.Name, p.Annotations[allocationKey])
		}
		perDevice[d.UUID] = append(perDevice[d.UUID], fmt.Sprintf("%s=%d", p.Name[:len(p.Name)-2], *d.ComputePct))
	}
	for uuid, holders := range perDevice {
		sort.Strings(holders)
		if !reflect.DeepEqual(holders, []string{"memory=16", "reserved=70"}) {
			t.Errorf("device %s holds %v, want one reserved pod (70 %%) and one memory-only pod (16 %%)", uuid, holders)
		}
	}
	if len(perDevice) != 2 {
		t.Errorf("the four pods are on %d devices, want both of release-1's", len(perDevice))
	}
	tb.checkLedger(t)
}

// kill -9 of the reserved node's agent: once its heartbeat is older than the TTL the extender
// refuses the node with a reason naming the stale report, though its devices are free.
func TestStaleAgentNodeAvoided(t *testing.T) {
	ns := tb.createNamespace(t, "stale")
	tb.createPod(t, ns, podSpec{name: "before", memory: "1Gi", reservedFor: "stale"})
	tb.waitBound(t, ns, 1, time.Minute)
	tb.agents["stale-1"].kill9()
	time.Sleep(heartbeatTTLd + 3*time.Second)
	tb.createPod(t, ns, podSpec{name: "after", memory: "1Gi", reservedFor: "stale"})
	ev := tb.waitFailedScheduling(t, ns, "after")
	t.Logf("stale node: %s", ev.Message)
	if !strings.Contains(ev.Message, "heartbeat") {
		t.Errorf("FailedScheduling does not say the node's report is stale: %q", ev.Message)
	}
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	if p, _ := tb.kc.CoreV1().Pods(ns).Get(c, "after", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Errorf("pod bound to the stale node %s", p.Spec.NodeName)
	}
	// A restarted agent reports again. kube-scheduler does not watch GPUNodes and its own
	// plugins (node selector, taints) refused the other nodes, so no event wakes the pod: it is
	// retried after the chart's scheduler.kubeScheduler.retryUnschedulableAfter (30s; flushed
	// every 30s) and then lands on the recovered node.
	c, cancel = ctx(60 * time.Second)
	defer cancel()
	restarted := time.Now()
	if err := tb.startAgent("stale-1"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(30*time.Second, 250*time.Millisecond, "a fresh GPUNode heartbeat of stale-1", func() (bool, error) {
		g, err := tb.dyn.Resource(gpuNodesGVR).Get(c, "stale-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		beat, _ := g.Object["status"].(map[string]any)["heartbeatTime"].(string)
		at, err := time.Parse(time.RFC3339, beat)
		return err == nil && at.After(restarted.Add(-time.Second)), err
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range tb.waitBound(t, ns, 2, 100*time.Second) {
		if p.Spec.NodeName != "stale-1" {
			t.Errorf("%s went to %q, want stale-1", p.Name, p.Spec.NodeName)
		}
	}
	tb.checkLedger(t)
}

// kill -9 of the active extender while pods arrive, and a restart: kube-scheduler's calls fail
// meanwhile (ignorable: false), the pods are retried, and the restarted extender rebuilds its
// ledger from the allocations on the API server before it answers.
func TestExtenderKilledMidBurst(t *testing.T) {
	const n = 40
	ns := tb.createNamespace(t, "burst")
	tb.createPods(t, ns, mixedWorkload("b", n), 4, 10, func() {
		tb.scheduler[0].extender.kill9()
		time.Sleep(time.Second)
		if err := tb.startExtender(0); err != nil {
			t.Errorf("restart extender-0: %v", err)
		}
	})
	tb.waitBound(t, ns, n, 3*time.Minute)
	tb.checkLedger(t)
}

// kill -9 of the leading kube-scheduler mid-burst: the second replica's kube-scheduler takes
// the Lease and its own extender (synced all along) binds the rest without double-booking.
func TestLeaderFailover(t *testing.T) {
	const n = 40
	tb.makeReplica0Lead(t)
	ns := tb.createNamespace(t, "failover")
	before, err := tb.leaseHolder()
	if err != nil {
		t.Fatal(err)
	}
	tb.createPods(t, ns, mixedWorkload("f", n), 4, 8, func() {
		tb.scheduler[0].kubeScheduler.kill9()
	})
	// The kubelet's part once the Lease has moved: the killed replica comes back as a follower,
	// so the scenarios after this one have two replicas again.
	defer func() {
		if err := tb.startKubeScheduler(0); err != nil {
			t.Errorf("restart kube-scheduler-0: %v", err)
		}
	}()
	after, err := tb.waitLeaderChange(before)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s -> %s", before, after)
	tb.waitBound(t, ns, n, 3*time.Minute)
	tb.checkLedger(t)
	// The rest were bound through the new leader's own extender (32 pods arrived after the kill).
	binds, err := tb.scrape(tb.scheduler[1].metricsPort, `gpupack_bind_requests_total{result="success"}`)
	if err != nil {
		t.Fatal(err)
	}
	if binds == 0 {
		t.Errorf("extender-1 wrote no Binding although its kube-scheduler took over")
	}
	t.Logf("extender-1 wrote %.0f Bindings after the failover", binds)
}

// A fresh install's first burst, the cold-start learner's case: two sizes that fill every device
// exactly (48 + 32 GiB on 80 GiB, one of each per device), on the two H100 nodes (4 devices, 8
// pods, pinned there by gpu-model), created in a shuffled order while no extender answers, as
// when pods are created before gpupack is ready. Both extenders then start cold; at their first
// filter they count the waiting burst, so no 32 GiB pod goes beside another (80 − 2·32 = 16 GiB,
// which no 48 GiB pod can use), and all 8 bind. Seeds are fixed so a failure replays.
func TestExactFillBurstOnColdExtenders(t *testing.T) {
	const model = "NVIDIA H100 80GB HBM3"
	for _, seed := range []int64{1, 2, 3} {
		ns := tb.createNamespace(t, fmt.Sprintf("exactfill%d", seed))
		for _, s := range tb.scheduler {
			s.extender.kill9()
		}
		var specs []podSpec
		for i := 0; i < 4; i++ {
			pin := map[string]string{"gpupack.io/gpu-model": model}
			specs = append(specs, podSpec{name: fmt.Sprintf("large-%d", i), memory: "48Gi", annotations: pin},
				podSpec{name: fmt.Sprintf("small-%d", i), memory: "32Gi", annotations: pin})
		}
		rand.New(rand.NewSource(seed)).Shuffle(len(specs), func(i, j int) { specs[i], specs[j] = specs[j], specs[i] })
		tb.createPods(t, ns, specs, 1, 0, nil)
		for i := range tb.scheduler {
			if err := tb.startExtender(i); err != nil {
				t.Fatalf("start extender-%d: %v", i, err)
			}
		}
		pods := tb.waitBound(t, ns, len(specs), 2*time.Minute)
		used := tb.checkLedger(t)
		devices, err := tb.gpuDevices()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != "h100-1" && p.Spec.NodeName != "h100-2" {
				t.Errorf("seed %d: %s went to %s, not an H100 node", seed, p.Name, p.Spec.NodeName)
			}
		}
		for uuid, d := range devices {
			if (d.node == "h100-1" || d.node == "h100-2") && used[uuid] != d.capacity {
				t.Errorf("seed %d: device %s on %s holds %d of %d MiB, want it filled by one pod of each size",
					seed, uuid, d.node, used[uuid], d.capacity)
			}
		}
		tb.deletePods(t, ns)
	}
}

// The burst as a running extender meets it: both extenders restarted cold and synced first, then
// 24 pods created by one client after another (as `kubectl apply` creates them), or by 8 clients
// at once (as a controller scaling out does), while kube-scheduler places them. Each pod is
// counted into the leader's learner exactly once (gpupack_learner_pods_total: "asked" at its
// filter or bind, or "waiting" when an early refresh found it pending). How many were already
// waiting is what the simulator's --burst assumes (docs/simulator.md, "A burst"), so the test
// logs it.
func TestRunningExtenderCountsABurstOnce(t *testing.T) {
	const n = 24
	tb.makeReplica0Lead(t)
	port := tb.scheduler[0].metricsPort
	learned := func() (asked, waiting float64) {
		var err error
		if asked, err = tb.scrape(port, `gpupack_learner_pods_total{source="asked"}`); err != nil {
			t.Fatal(err)
		}
		if waiting, err = tb.scrape(port, `gpupack_learner_pods_total{source="waiting"}`); err != nil {
			t.Fatal(err)
		}
		return asked, waiting
	}
	for _, clients := range []int{1, 8} {
		for i := range tb.scheduler {
			tb.scheduler[i].extender.kill9()
			if err := tb.startExtender(i); err != nil {
				t.Fatalf("start extender-%d: %v", i, err)
			}
		}
		// Ready comes before the learner's sync: wait for its refresh, so that the pods held or
		// waiting before the burst are counted before it.
		if err := waitFor(30*time.Second, 100*time.Millisecond, "extender-0's first policy refresh", func() (bool, error) {
			v, err := tb.scrape(port, "gpupack_policy_refreshes_total")
			return v >= 1, err
		}); err != nil {
			t.Fatal(err)
		}
		asked0, waiting0 := learned()
		ns := tb.createNamespace(t, fmt.Sprintf("learnburst%d", clients))
		var specs []podSpec
		for i := 0; i < n; i++ {
			specs = append(specs, podSpec{name: fmt.Sprintf("lb-%02d", i), memory: "4Gi",
				annotations: map[string]string{"gpupack.io/device-kind": "gpu"}})
		}
		tb.createPods(t, ns, specs, clients, 0, nil)
		tb.waitBound(t, ns, n, 2*time.Minute)
		asked1, waiting1 := learned()
		asked, waiting := asked1-asked0, waiting1-waiting0
		if asked+waiting != n {
			t.Errorf("%d clients: extender-0 counted %.0f asked + %.0f waiting pods of a burst of %d, want each once",
				clients, asked, waiting, n)
		}
		t.Logf("a burst of %d pods from %d client(s): extender-0 counted %.0f asked about and %.0f waiting",
			n, clients, asked, waiting)
		tb.deletePods(t, ns)
	}
}

// scrape reads one sample (name with its labels, as exposed) from a /metrics endpoint.
func (b *bed) scrape(port int, sample string) (float64, error) {
	samples, err := metricsOf(port)
	if err != nil {
		return 0, err
	}
	v, ok := samples[sample]
	if !ok {
		return 0, fmt.Errorf("no %s in :%d/metrics", sample, port)
	}
	return v, nil
}

// metricsOf reads every sample of a /metrics endpoint, keyed by name with its labels as exposed.
func metricsOf(port int) (map[string]float64, error) {
	r, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body)
}

// parseMetrics reads the Prometheus text format into sample (name with its labels) → value.
func parseMetrics(body []byte) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		if cut < 0 {
			return nil, fmt.Errorf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(line[cut+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		out[line[:cut]] = v
	}
	return out, nil
}

// What `kubectl get gpunodes` prints: the CRD's printer columns, served as a Table by the API.
func TestGetGpunodesPrinterColumns(t *testing.T) {
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	raw, err := tb.kc.CoreV1().RESTClient().Get().AbsPath("/apis/gpupack.io/v1alpha1/gpunodes").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(c)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("not a Table: %v: %s", err, raw)
	}
	var names []string
	for _, col := range table.ColumnDefinitions {
		names = append(names, col.Name)
	}
	// Exactly the CRD's columns after Name: a CRD that declares printer columns gets no Age
	// column from the API server (it is added only when none are declared); the Heartbeat date
	// column is the age users look at.
	want := []string{"Name", "GPUs", "Memory MiB", "Allocated MiB", "Used MiB", "Enforcement", "Memory Enforced",
		"Compute Enforced", "Heartbeat"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("columns %v, want %v", names, want)
	}
	if len(table.Rows) != len(tb.nodes) {
		t.Fatalf("%d rows, want one per node (%d)", len(table.Rows), len(tb.nodes))
	}
	for _, row := range table.Rows {
		t.Logf("%v", row.Cells)
		for _, col := range []string{"GPUs", "Memory MiB", "Heartbeat"} {
			idx := indexOf(names, col)
			if idx < 0 || idx >= len(row.Cells) || row.Cells[idx] == nil || fmt.Sprint(row.Cells[idx]) == "" || fmt.Sprint(row.Cells[idx]) == "0" {
				t.Errorf("row %v: column %s is empty: the agent does not write its jsonPath", row.Cells[0], col)
			}
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// RBAC: the components above ran with exactly the chart's ServiceAccounts (a missing verb fails
// the scenarios). Here, the other direction: the agent's token cannot bind pods nor read
// Secrets, the scheduler's cannot write GPUNode status.
func TestServiceAccountsAreNarrow(t *testing.T) {
	cases := []struct {
		sa      string
		attrs   authorizationv1.ResourceAttributes
		allowed bool
	}{
		{tb.saScheduler, authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "binding"}, true},
		{tb.saScheduler, authorizationv1.ResourceAttributes{Verb: "watch", Group: "gpupack.io", Resource: "gpunodes"}, true},
		{tb.saScheduler, authorizationv1.ResourceAttributes{Verb: "update", Group: "gpupack.io", Resource: "gpunodes", Subresource: "status"}, false},
		// The bind fence (docs/kubernetes.md "Permissions"): Leases in the release's namespace only.
		{tb.saScheduler, authorizationv1.ResourceAttributes{Namespace: releaseNS, Verb: "get", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{tb.saScheduler, authorizationv1.ResourceAttributes{Namespace: releaseNS, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{tb.saScheduler, authorizationv1.ResourceAttributes{Namespace: releaseNS, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{tb.saScheduler, authorizationv1.ResourceAttributes{Namespace: "default", Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, false},
		{tb.saAgent, authorizationv1.ResourceAttributes{Verb: "update", Group: "gpupack.io", Resource: "gpunodes", Subresource: "status"}, true},
		{tb.saAgent, authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "binding"}, false},
		{tb.saAgent, authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, false},
	}
	c, cancel := ctx(20 * time.Second)
	defer cancel()
	for _, tc := range cases {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + releaseNS + ":" + tc.sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS},
			ResourceAttributes: &tc.attrs}}
		r, err := tb.kc.AuthorizationV1().SubjectAccessReviews().Create(c, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.allowed {
			t.Errorf("%s %s %s/%s: allowed=%v, want %v (%s)", tc.sa, tc.attrs.Verb, tc.attrs.Resource, tc.attrs.Subresource, r.Status.Allowed, tc.allowed, r.Status.Reason)
		}
	}
}

// verifyChartCert: the helm-generated webhook certificate chains to the chart's CA for the
// Service name the MutatingWebhookConfiguration uses.
func verifyChartCert(secret map[string][]byte, dns string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret["ca.crt"]) {
		return fmt.Errorf("chart webhook Secret: ca.crt is not PEM")
	}
	block, _ := pem.Decode(secret["tls.crt"])
	if block == nil {
		return fmt.Errorf("chart webhook Secret: tls.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: dns, Roots: pool}); err != nil {
		return fmt.Errorf("chart webhook certificate does not verify for %s: %v", dns, err)
	}
	return nil
}
