package cluster

// Burstable memory on the real control plane (docs/annotations.md, "Burstable memory"): a pod
// with gpupack.io/gpu-memory-limit is placed on its guaranteed amount and bound with the
// guarantee as its soft limit and the ceiling as its hard limit, and a second pod whose ceiling
// would take the device's Σ ceilings over the bound (1.5 × 80 GiB = 120 GiB) waits with the
// verdict that says so.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestBurstablePodBoundOnItsRequestWithItsCeiling(t *testing.T) {
	ns := tb.createNamespace(t, "burstable")
	devices, err := tb.gpuDevices()
	if err != nil {
		t.Fatal(err)
	}
	// One whole 80 GiB GPU, the same every run: both pods are pinned to it.
	var uuids []string
	for uuid, d := range devices {
		if d.capacity == 81920 && strings.HasPrefix(uuid, "GPU-") {
			uuids = append(uuids, uuid)
		}
	}
	if len(uuids) == 0 {
		t.Fatal("no whole 80 GiB GPU in the bed")
	}
	sort.Strings(uuids)
	device := uuids[0]
	pinned := func(ceiling string) map[string]string {
		return map[string]string{"gpupack.io/gpu-uuids": device, "gpupack.io/gpu-memory-limit": ceiling}
	}
	// 8 GiB guaranteed under a 100 GiB ceiling: 100 GiB ≤ 120 GiB, though above the device.
	tb.createPods(t, ns, []podSpec{{name: "notebook", memory: "8Gi", annotations: pinned("100Gi")}}, 1, 0, nil)
	pods := tb.waitBound(t, ns, 1, 2*time.Minute)
	p := &pods[0]
	tb.checkWebhookEnv(t, p)
	var a allocation
	if err := json.Unmarshal([]byte(p.Annotations[allocationKey]), &a); err != nil {
		t.Fatalf("%s: %v", allocationKey, err)
	}
	if len(a.Containers) != 1 || len(a.Containers[0].Devices) != 1 {
		t.Fatalf("allocation %s: want one container on one device", p.Annotations[allocationKey])
	}
	got := a.Containers[0].Devices[0]
	if got.UUID != device || got.MemMiB != 8192 || got.LimitMiB != 102400 {
		t.Errorf("allocation %s: want %s with memMiB 8192 (the guarantee) and limitMiB 102400 (the ceiling)", p.Annotations[allocationKey], device)
	}
	want := map[string]string{
		"gpupack.io/c0-memory-request-mib": "8192",   // soft limit: the guarantee
		"gpupack.io/c0-memory-limit-mib":   "102400", // hard limit: the ceiling
		"gpupack.io/c0-mps-memory-limit":   "0=102400M",
	}
	for key, value := range want {
		if p.Annotations[key] != value {
			t.Errorf("%s = %q, want %q", key, p.Annotations[key], value)
		}
	}
	// The ledger counts the guarantee: 8192 MiB on the device.
	if used := tb.checkLedger(t); used[device] != 8192 {
		t.Errorf("device %s holds %d MiB of caps, want 8192", device, used[device])
	}

	// 8 GiB more is guaranteed room enough (16 of 80 GiB), but its 24 GiB ceiling would make
	// 100 + 24 = 124 GiB of ceilings > 120 GiB: the pod waits, and kube-scheduler's event says why.
	tb.createPods(t, ns, []podSpec{{name: "second", memory: "8Gi", annotations: pinned("24Gi")}}, 1, 0, nil)
	isSecond := func(p *corev1.Pod) bool { return p.Name == "second" }
	_, waiting := tb.waitSettled(t, ns, 2, 2*time.Minute, isSecond, "memory in ceilings")
	if msg, ok := waiting["second"]; !ok || !strings.Contains(msg, "24576 MiB gpupack.io/gpu-memory-limit") {
		t.Errorf("second: want it Pending for the ceiling bound, got %q (bound: %v)", msg, !ok)
	}
	fmt.Printf("burst: %s bound on %s with 8192 / 102400 MiB; second waits: %s\n", p.Name, device, waiting["second"])
}
