package cluster

// Defragmentation on the real control plane (docs/placement.md, "Defragmentation"; the bed runs
// it with mode on). Two whole 80 GiB GPUs, X and Y; every pod pinned to them with
// gpupack.io/gpu-uuids:
//
//	X: fixed 40 GiB, then mover 30 GiB (movable, made by a ReplicaSet that kube-controller-manager
//	   runs; pinned to X or Y, and Y is full when it comes, so it lands on X)    → 10 GiB free
//	Y: fixed 50 GiB (after the 80 GiB that kept mover off it)                  → 30 GiB free
//	big 40 GiB (pinned to X or Y) fits on neither; moving mover to Y (30 ≤ 30) leaves X
//	10 + 30 = 40 GiB: the plan.
//
// The extender evicts mover through the Eviction API; the ReplicaSet makes a replacement, which
// must land on Y, because the room on X is held for big, which then binds on X. With a
// PodDisruptionBudget that allows no disruption, the eviction is refused and nothing moves.

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fragmentedPair lays out X and Y as above in `ns` and returns them with the mover's pod.
func (b *bed) fragmentedPair(t *testing.T, ns string) (x, y pinnedGpu, mover corev1.Pod) {
	t.Helper()
	x, y = b.twoUntaintedWholeGpus(t, 81920)
	pin := func(uuids ...string) map[string]string {
		return map[string]string{"gpupack.io/gpu-uuids": strings.Join(uuids, ",")}
	}
	b.createPods(t, ns, []podSpec{{name: "y-full", memory: "80Gi", annotations: pin(y.uuid)},
		{name: "x-fixed", memory: "40Gi", annotations: pin(x.uuid)}}, 1, 0, nil)
	b.waitBound(t, ns, 2, 2*time.Minute)

	moverAnnotations := pin(x.uuid, y.uuid)
	moverAnnotations["gpupack.io/movable"] = "true"
	template := b.podObject(ns, podSpec{name: "mover", memory: "30Gi", annotations: moverAnnotations})
	labels := map[string]string{"app": "mover"}
	replicas := int32(1)
	c, cancel := ctx(15 * time.Second)
	defer cancel()
	if _, err := b.kc.AppsV1().ReplicaSets(ns).Create(c, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mover"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: moverAnnotations},
				Spec: template.Spec}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ReplicaSet: %v", err)
	}
	// Before the namespace's pods go (cleanups run last first): else it makes them again.
	t.Cleanup(func() {
		dc, dcancel := ctx(10 * time.Second)
		defer dcancel()
		if err := b.kc.AppsV1().ReplicaSets(ns).Delete(dc, "mover", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ReplicaSet mover: %v", err)
		}
	})
	pods := b.waitBound(t, ns, 3, 2*time.Minute)
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "mover-") {
			mover = p
		}
	}
	if mover.Spec.NodeName != x.node || deviceOf(t, &mover) != x.uuid {
		t.Fatalf("%s bound on %s %s, want X (%s %s)", mover.Name, mover.Spec.NodeName, deviceOf(t, &mover), x.node, x.uuid)
	}

	// Y down to 50 GiB fixed: 30 GiB free there, 10 on X.
	if err := b.kc.CoreV1().Pods(ns).Delete(c, "y-full", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete y-full: %v", err)
	}
	if err := waitFor(30*time.Second, 250*time.Millisecond, "y-full gone", func() (bool, error) {
		pods, err := b.listPods(ns)
		return err == nil && len(pods) == 2, err
	}); err != nil {
		t.Fatal(err)
	}
	b.createPods(t, ns, []podSpec{{name: "y-fixed", memory: "50Gi", annotations: pin(y.uuid)}}, 1, 0, nil)
	b.waitBound(t, ns, 3, 2*time.Minute)
	return x, y, mover
}

func TestDefragEvictsAMovablePodAndTheWaitingPodBindsInItsRoom(t *testing.T) {
	ns := tb.createNamespace(t, "defrag")
	x, y, mover := tb.fragmentedPair(t, ns)
	stop := tb.standInKubelet(t, ns)
	defer stop()

	tb.createPods(t, ns, []podSpec{{name: "big", memory: "40Gi",
		annotations: map[string]string{"gpupack.io/gpu-uuids": x.uuid + "," + y.uuid}}}, 1, 0, nil)
	// big on X; mover's replacement (a new pod of the ReplicaSet) on Y; the old mover gone.
	var pods []corev1.Pod
	err := waitFor(2*time.Minute, 500*time.Millisecond, "big bound and mover's replacement bound", func() (bool, error) {
		var err error
		if pods, err = tb.listPods(ns); err != nil {
			return false, err
		}
		var big, replacement bool
		for i := range pods {
			p := &pods[i]
			switch {
			case p.Name == mover.Name:
				return false, nil // not gone yet
			case p.Name == "big":
				big = p.Spec.NodeName != ""
			case strings.HasPrefix(p.Name, "mover-"):
				replacement = p.Spec.NodeName != ""
			}
		}
		return big && replacement, nil
	})
	if err != nil {
		evs, _ := tb.eventsOf(ns, "big")
		t.Fatalf("%v; big's events: %v; %v", err, eventSummaries(evs), tb.unboundExamples(ns, pods))
	}
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Name == "big" && (p.Spec.NodeName != x.node || deviceOf(t, p) != x.uuid):
			t.Errorf("big bound on %s %s, want X (%s %s), the room its plan made", p.Spec.NodeName, deviceOf(t, p), x.node, x.uuid)
		case strings.HasPrefix(p.Name, "mover-") && (p.Spec.NodeName != y.node || deviceOf(t, p) != y.uuid):
			t.Errorf("%s (the replacement) bound on %s %s, want Y (%s %s): X's room was held for big", p.Name, p.Spec.NodeName, deviceOf(t, p), y.node, y.uuid)
		}
	}
	evs, err := tb.eventsOf(ns, mover.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ev := findEvent(evs, "GpupackDefragEvicted"); ev == nil || !strings.Contains(ev.Message, "to make room for "+ns+"/big") {
		t.Errorf("%s: no GpupackDefragEvicted Event naming big: %v", mover.Name, eventSummaries(evs))
	}
	if evs, err = tb.eventsOf(ns, "big"); err != nil {
		t.Fatal(err)
	}
	plan := findEvent(evs, "GpupackDefragPlan")
	if plan == nil || !strings.Contains(plan.Message, "evict "+ns+"/"+mover.Name+" (30720 MiB) from "+x.node) {
		t.Errorf("big: no GpupackDefragPlan Event naming the move: %v", eventSummaries(evs))
	}
	tb.checkLedger(t)
	if plan != nil {
		t.Logf("defrag: %s", plan.Message)
	}
}

func TestDefragHonoursAPodDisruptionBudget(t *testing.T) {
	ns := tb.createNamespace(t, "defrag-pdb")
	c, cancel := ctx(15 * time.Second)
	defer cancel()
	// The ReplicaSet's pods carry app=mover in every namespace; this budget covers this one's.
	// At least one mover must stay: the disruption controller allows none to go.
	one := intstr.FromInt32(1)
	if _, err := tb.kc.PolicyV1().PodDisruptionBudgets(ns).Create(c, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "mover"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mover"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
	x, y, mover := tb.fragmentedPair(t, ns)
	stop := tb.standInKubelet(t, ns)
	defer stop()
	if err := waitFor(30*time.Second, 250*time.Millisecond, "the budget counting mover healthy", func() (bool, error) {
		gc, gcancel := ctx(10 * time.Second)
		defer gcancel()
		pdb, err := tb.kc.PolicyV1().PodDisruptionBudgets(ns).Get(gc, "mover", metav1.GetOptions{})
		return err == nil && pdb.Status.CurrentHealthy == 1 && pdb.Status.DisruptionsAllowed == 0, err
	}); err != nil {
		t.Fatal(err)
	}
	tb.createPods(t, ns, []podSpec{{name: "big", memory: "40Gi",
		annotations: map[string]string{"gpupack.io/gpu-uuids": x.uuid + "," + y.uuid}}}, 1, 0, nil)
	var stopped *corev1.Event
	if err := waitFor(90*time.Second, time.Second, "a GpupackDefragStopped Event on big", func() (bool, error) {
		evs, err := tb.eventsOf(ns, "big")
		stopped = findEvent(evs, "GpupackDefragStopped")
		return stopped != nil, err
	}); err != nil {
		evs, _ := tb.eventsOf(ns, "big")
		t.Fatalf("%v; big's events: %v", err, eventSummaries(evs))
	}
	if !strings.Contains(stopped.Message, "a PodDisruptionBudget forbids evicting "+ns+"/"+mover.Name) {
		t.Errorf("GpupackDefragStopped says %q", stopped.Message)
	}
	pods, err := tb.listPods(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Name == mover.Name && (p.Spec.NodeName != x.node || p.DeletionTimestamp != nil) {
			t.Errorf("%s moved or is being deleted; the budget forbids it", p.Name)
		}
		if p.Name == "big" && p.Spec.NodeName != "" {
			t.Errorf("big bound on %s though nothing could move", p.Spec.NodeName)
		}
	}
	tb.checkLedger(t)
	t.Logf("defrag with a budget: %s", stopped.Message)
}

// standInKubelet does the kubelet's part for the pods of `ns`: a bound pod is reported Running
// and Ready (the Eviction API ignores budgets for a Pending pod, and the disruption controller
// counts only Ready pods as healthy), and a pod being deleted (an eviction deletes gracefully) is
// deleted for good at once, as a kubelet does once its containers stop.
func (b *bed) standInKubelet(t *testing.T, ns string) (stop func()) {
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.Err() == nil {
			if pods, err := b.listPods(ns); err == nil {
				for i := range pods {
					p := &pods[i]
					switch {
					case p.DeletionTimestamp != nil:
						_ = b.kc.CoreV1().Pods(ns).Delete(c, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
					case p.Spec.NodeName != "" && p.Status.Phase != corev1.PodRunning:
						p.Status.Phase = corev1.PodRunning
						p.Status.Conditions = append(p.Status.Conditions,
							corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
						_, _ = b.kc.CoreV1().Pods(ns).UpdateStatus(c, p, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-c.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// deviceOf: the device the pod's allocation names (its one container on one device).
func deviceOf(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	var a allocation
	if err := json.Unmarshal([]byte(p.Annotations[allocationKey]), &a); err != nil || len(a.Containers) != 1 ||
		len(a.Containers[0].Devices) != 1 {
		return ""
	}
	return a.Containers[0].Devices[0].UUID
}

// A whole GPU on a node without taints, with its node.
type pinnedGpu struct {
	uuid string
	node string
}

// twoUntaintedWholeGpus: the first two whole GPUs of `mib` (by UUID) on nodes without taints.
func (b *bed) twoUntaintedWholeGpus(t *testing.T, mib int64) (pinnedGpu, pinnedGpu) {
	t.Helper()
	devices, err := b.gpuDevices()
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for uuid, d := range devices {
		if d.capacity == mib && strings.HasPrefix(uuid, "GPU-") {
			uuids = append(uuids, uuid)
		}
	}
	sort.Strings(uuids)
	var out []pinnedGpu
	tainted := map[string]bool{}
	for _, uuid := range uuids {
		node := devices[uuid].node
		if _, seen := tainted[node]; !seen {
			c, cancel := ctx(10 * time.Second)
			n, err := b.kc.CoreV1().Nodes().Get(c, node, metav1.GetOptions{})
			cancel()
			if err != nil {
				t.Fatalf("node %s: %v", node, err)
			}
			tainted[node] = len(n.Spec.Taints) > 0
		}
		if !tainted[node] {
			out = append(out, pinnedGpu{uuid, node})
		}
		if len(out) == 2 {
			return out[0], out[1]
		}
	}
	t.Fatalf("fewer than two whole %d MiB GPUs on untainted nodes", mib)
	return pinnedGpu{}, pinnedGpu{}
}

func eventSummaries(evs []corev1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
