package cluster

// Defragmentation's dry run on the real control plane (docs/placement.md, "Defragmentation"):
// a pod that fits on no device for want of room, where moving one movable pod would make room,
// gets a GpupackDefragPlan Event naming that move, and nothing is evicted. Two whole 80 GiB GPUs,
// X and Y, every pod pinned to them with gpupack.io/gpu-uuids:
//
//	X: fixed 40 GiB, then mover 30 GiB (movable, of a ReplicaSet; pinned to X or Y, and Y is
//	   full when it comes, so it lands on X)                    → 10 GiB free
//	Y: fixed 50 GiB (after the 80 GiB that kept mover off it)   → 30 GiB free
//	big 40 GiB (pinned to X or Y): fits on neither; moving mover to Y (30 ≤ 30) leaves X
//	10 + 30 = 40 GiB: the plan.

import (
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefragDryRunReportsTheMoveThatMakesRoom(t *testing.T) {
	ns := tb.createNamespace(t, "defrag")
	x, y := tb.twoUntaintedWholeGpus(t, 81920)
	pin := func(uuids ...string) map[string]string {
		return map[string]string{"gpupack.io/gpu-uuids": strings.Join(uuids, ",")}
	}
	tb.createPods(t, ns, []podSpec{{name: "y-full", memory: "80Gi", annotations: pin(y.uuid)},
		{name: "x-fixed", memory: "40Gi", annotations: pin(x.uuid)}}, 1, 0, nil)
	tb.waitBound(t, ns, 2, 2*time.Minute)

	// mover belongs to a ReplicaSet and opts in; with Y full it can only land on X.
	c, cancel := ctx(15 * time.Second)
	defer cancel()
	replicas := int32(0)
	labels := map[string]string{"app": "mover"}
	rs, err := tb.kc.AppsV1().ReplicaSets(ns).Create(c, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mover"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: podImage}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ReplicaSet: %v", err)
	}
	moverAnnotations := pin(x.uuid, y.uuid)
	moverAnnotations["gpupack.io/movable"] = "true"
	mover := tb.podObject(ns, podSpec{name: "mover-0", memory: "30Gi", annotations: moverAnnotations})
	mover.Labels = labels
	controller := true
	mover.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &controller}}
	if _, err := tb.kc.CoreV1().Pods(ns).Create(c, mover, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create mover-0: %v", err)
	}
	bound := tb.waitBound(t, ns, 3, 2*time.Minute)
	if node := nodeOf(bound, "mover-0"); node != x.node {
		t.Fatalf("mover-0 bound on %q, want X's node %q", node, x.node)
	}

	// Y down to 50 GiB fixed: 30 GiB free there, 10 on X.
	if err := tb.kc.CoreV1().Pods(ns).Delete(c, "y-full", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete y-full: %v", err)
	}
	if err := waitFor(30*time.Second, 250*time.Millisecond, "y-full gone", func() (bool, error) {
		pods, err := tb.listPods(ns)
		return err == nil && nodeOf(pods, "y-full") == "" && len(pods) == 2, err
	}); err != nil {
		t.Fatal(err)
	}
	tb.createPods(t, ns, []podSpec{{name: "y-fixed", memory: "50Gi", annotations: pin(y.uuid)}}, 1, 0, nil)
	tb.waitBound(t, ns, 3, 2*time.Minute)

	tb.createPods(t, ns, []podSpec{{name: "big", memory: "40Gi", annotations: pin(x.uuid, y.uuid)}}, 1, 0, nil)
	want := "would evict " + ns + "/mover-0 (30720 MiB) from " + x.node + ", it fits again on " + y.node +
		": then " + ns + "/big fits on " + x.node + " (1 move, 30720 MiB moved)"
	var plan *corev1.Event
	if err := waitFor(90*time.Second, time.Second, "a GpupackDefragPlan Event on big", func() (bool, error) {
		evs, err := tb.eventsOf(ns, "big")
		if err != nil {
			return false, err
		}
		plan = findEvent(evs, "GpupackDefragPlan")
		return plan != nil, nil
	}); err != nil {
		evs, _ := tb.eventsOf(ns, "big")
		t.Fatalf("%v; big's events: %v", err, eventSummaries(evs))
	}
	if !strings.Contains(plan.Message, want) || !strings.Contains(plan.Message, "dry-run: nothing evicted") {
		t.Errorf("GpupackDefragPlan says %q, want it to contain %q", plan.Message, want)
	}
	// A dry run: mover-0 still runs where it was, big still waits, and the ledger holds.
	pods, err := tb.listPods(ns)
	if err != nil {
		t.Fatal(err)
	}
	if node := nodeOf(pods, "mover-0"); node != x.node {
		t.Errorf("mover-0 is on %q after the dry run, want %q (nothing evicted)", node, x.node)
	}
	if node := nodeOf(pods, "big"); node != "" {
		t.Errorf("big bound on %q; with X at 10 GiB and Y at 30 GiB free it fits nowhere", node)
	}
	tb.checkLedger(t)
	t.Logf("defrag dry run: %s", plan.Message)
}

// A whole GPU of `mib` on a node without taints, with its node.
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

func nodeOf(pods []corev1.Pod, name string) string {
	for i := range pods {
		if pods[i].Name == name {
			return pods[i].Spec.NodeName
		}
	}
	return ""
}

func eventSummaries(evs []corev1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
