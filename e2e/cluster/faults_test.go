package cluster

// Control-plane faults under a burst (docs/e2e.md): kube-apiserver killed, etcd killed and its
// history compacted, the API answering past every client's timeout, each while faultBurst pods
// are being created and scheduled. Afterwards, from the API's own view: no pod lost, every bound
// pod carries one allocation naming its node, Σ caps ≤ capacity on every device, every pod that
// fits bound within faultSettle of the fault's end, and no gpupack process exited.

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	faultBurst = 200
	// How long after the fault ends every pod that fits must be bound: kube-scheduler's backoff
	// for a pod whose bind failed grows to 10 s, a replacement kube-scheduler waits out the old
	// Lease (4 s), and a 2-core machine shares its CPUs with the whole bed.
	faultSettle = 4 * time.Minute
	// Pods bound before the fault starts: the burst is under way, most of it still to come.
	faultTrigger = 20
)

// needOwnControlPlane skips a fault scenario on an existing cluster (GPUPACK_CLUSTER_KUBECONFIG):
// the suite neither owns its etcd and API server there nor sits between them and kube-scheduler.
func needOwnControlPlane(t *testing.T) {
	t.Helper()
	if tb.cp == nil || tb.apiProxy == nil {
		t.Skip("needs the bed's own etcd, kube-apiserver and API proxy; GPUPACK_CLUSTER_KUBECONFIG names an existing cluster")
	}
}

// gpupackProcs are the processes that must live through every fault without a restart.
func (b *bed) gpupackProcs() map[string]*proc {
	out := map[string]*proc{"webhook": b.webhook}
	for i, s := range b.scheduler {
		out[fmt.Sprintf("extender-%d", i)] = s.extender
	}
	for node, a := range b.agents {
		out["agent "+node] = a
	}
	return out
}

// actAsKubelet restarts a kube-scheduler that exited, until the returned stop is called or the
// test ends (a t.Fatal on the way must not leave it logging into a finished test, which panics
// the whole suite): kube-scheduler exits by design when it cannot renew its leader Lease within
// renewDeadline (3 s in the chart), and a kubelet would restart its container.
func (b *bed) actAsKubelet(t *testing.T) (stop func() (restarts int)) {
	quit := make(chan struct{})
	done := make(chan struct{})
	restarts := 0
	var once sync.Once
	stop = func() int {
		once.Do(func() {
			close(quit)
			<-done
		})
		return restarts
	}
	t.Cleanup(func() { stop() })
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(250 * time.Millisecond):
			}
			for i, s := range b.scheduler {
				if s.kubeScheduler.exited() {
					t.Logf("kube-scheduler-%d exited (%s); restarting it as the kubelet would", i, lastLines(s.kubeScheduler.tail(3), 1))
					if err := b.startKubeScheduler(i); err != nil {
						t.Errorf("restart kube-scheduler-%d: %v", i, err)
					}
					restarts++
				}
			}
		}
	}()
	return stop
}

// createPodsThroughFault creates `specs` from `workers` goroutines, each create retried until
// it succeeds or the pod exists (a create that landed but lost its answer), for up to the
// deadline: the API may be down or slow for part of the burst.
func (b *bed) createPodsThroughFault(t *testing.T, ns string, specs []podSpec, workers int, deadline time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	next := make(chan podSpec)
	var wg sync.WaitGroup
	end := time.Now().Add(deadline)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				for {
					c, cancel := ctx(10 * time.Second)
					_, err := b.kc.CoreV1().Pods(ns).Create(c, b.podObject(ns, p), metav1.CreateOptions{})
					cancel()
					if err == nil || apierrors.IsAlreadyExists(err) {
						break
					}
					if time.Now().After(end) {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%s: %v", p.name, err))
						mu.Unlock()
						break
					}
					time.Sleep(500 * time.Millisecond)
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
		t.Errorf("%d pods not created within %s, first: %s", len(errs), deadline, errs[0])
	}
}

// faultOutcome is what a fault did to the scheduler pods, for the scenario's log and for the
// scenarios that assert their fault was felt.
type faultOutcome struct {
	kubeSchedulerRestarts int
	delta                 map[string]float64 // extenderSamples, summed over both extenders
}

// extenderSamples are the counters a fault moves: binds that failed, watches that ended, lists
// after a 410.
var extenderSamples = []string{
	`gpupack_bind_requests_total{result="success"}`,
	`gpupack_bind_requests_total{result="conflict"}`,
	`gpupack_bind_requests_total{result="error"}`,
	`gpupack_kube_watch_restarts_total{resource="pods"}`,
	`gpupack_kube_relists_total{resource="pods"}`,
}

// burstThroughFault creates faultBurst pods of the mixed workload in `base`'s namespace, runs
// `fault` once faultTrigger of them are bound (it returns when the fault is over), and checks
// the invariants.
func (b *bed) burstThroughFault(t *testing.T, base string, fault func(t *testing.T)) faultOutcome {
	t.Helper()
	ns := b.createNamespace(t, base)
	gpupack := b.gpupackProcs()
	stopKubelet := b.actAsKubelet(t)
	before := b.extenderCounters(t)

	created := make(chan struct{})
	go func() {
		defer close(created)
		b.createPodsThroughFault(t, ns, mixedWorkload(base[:1], faultBurst), 8, faultSettle)
	}()
	if err := waitFor(2*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d pods of %s bound", faultTrigger, ns), func() (bool, error) {
		pods, err := b.listPods(ns)
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound >= faultTrigger, err
	}); err != nil {
		<-created
		t.Fatal(err)
	}
	pods, _ := b.listPods(ns)
	t.Logf("fault starts with %d of %d pods created", len(pods), faultBurst)
	start := time.Now()
	fault(t)
	t.Logf("fault over after %.1fs", time.Since(start).Seconds())
	<-created

	isWhole := func(p *corev1.Pod) bool { return strings.HasSuffix(p.Name, "-whole") }
	bound, waiting := b.waitSettled(t, ns, faultBurst, faultSettle, isWhole, "empty device")
	out := faultOutcome{kubeSchedulerRestarts: stopKubelet(), delta: map[string]float64{}}
	b.checkLedger(t)
	for name, p := range gpupack {
		if p.exited() {
			t.Errorf("%s exited during the fault: %s", name, p.tail(10))
		}
	}
	after := b.extenderCounters(t)
	for _, name := range extenderSamples {
		out.delta[name] = after[name] - before[name]
	}
	t.Logf("%d bound, %d whole-device pods waiting for an empty device; %d kube-scheduler restarts; extenders: %v",
		len(bound), len(waiting), out.kubeSchedulerRestarts, out.delta)
	return out
}

// extenderCounters sums extenderSamples over both extenders.
func (b *bed) extenderCounters(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for i, s := range b.scheduler {
		m, err := metricsOf(s.metricsPort)
		if err != nil {
			t.Errorf("extender-%d metrics: %v", i, err)
			continue
		}
		for _, name := range extenderSamples {
			out[name] += m[name]
		}
	}
	return out
}

// kill -9 of kube-apiserver while the burst is being scheduled, and a start with the same flags
// 5 s later (an upgrade, a crash, a certificate rotation). Every client's connections break
// mid-write: the extender once died of that write's SIGPIPE, without a log line, and nothing got
// a node after it. Now every gpupack process lives through it with no restart. The restarted
// kube-apiserver answers 403 until its RBAC caches fill: the bind fence must wait that out, not
// go off (it once did, and binds of one replica overbooked a device).
func TestAPIServerKilledMidBurst(t *testing.T) {
	needOwnControlPlane(t)
	tb.burstThroughFault(t, "apikill", func(t *testing.T) {
		if err := tb.cp.restartAPIServer(5 * time.Second); err != nil {
			t.Fatalf("restart kube-apiserver: %v", err)
		}
	})
	for i, s := range tb.scheduler {
		if up, err := tb.scrape(s.metricsPort, "gpupack_bind_fence_up"); err != nil || up != 1 {
			t.Errorf("extender-%d: gpupack_bind_fence_up = %v (%v) after kube-apiserver's restart: the fence went off (see its log)", i, up, err)
		}
	}
}

// kill -9 of etcd for 10 s: kube-apiserver answers 5xx to every write and quorum read, and its
// watch cache loses its source. etcd then starts on the same data with its history compacted
// past the outage, so kube-apiserver's watch cache relists and clients resuming from before the
// outage are told 410 Gone: the extenders' informers relist and diff, and binds go on from the
// new view.
func TestEtcdRestartedMidBurst(t *testing.T) {
	needOwnControlPlane(t)
	out := tb.burstThroughFault(t, "etcdkill", func(t *testing.T) {
		rev, err := tb.cp.restartEtcdCompacted(10 * time.Second)
		if err != nil {
			t.Fatalf("restart etcd: %v", err)
		}
		t.Logf("etcd back, compacted at revision %d", rev)
		if err := tb.cp.waitAPIServerReady(); err != nil {
			t.Fatalf("kube-apiserver after etcd's restart: %v", err)
		}
	})
	if out.delta[`gpupack_kube_relists_total{resource="pods"}`] == 0 {
		t.Errorf("no extender's pod informer relisted after etcd's history was compacted (no 410 reached it): %v", out.delta)
	}
}

// For 30 s every answer of kube-apiserver reaches the scheduler pods 12 s late: past the
// extender's 10 s per-call timeout (its fence, fresh read and Binding time out; a Binding may
// still land after the extender gave up on it) and past kube-scheduler's 3 s renewDeadline (it
// loses its Lease and exits). Watches deliver late but in order. Then the API is fast again.
func TestSlowAPIServerMidBurst(t *testing.T) {
	needOwnControlPlane(t)
	out := tb.burstThroughFault(t, "slowapi", func(t *testing.T) {
		tb.apiProxy.setDelay(12 * time.Second)
		time.Sleep(30 * time.Second)
		tb.apiProxy.setDelay(0)
	})
	// The fault reached the scheduler pods: a Lease lost, or a Binding that timed out.
	if out.kubeSchedulerRestarts == 0 && out.delta[`gpupack_bind_requests_total{result="error"}`] == 0 {
		t.Errorf("12 s answers for 30 s made no kube-scheduler lose its Lease and no Binding fail: is the proxy in their path? %v", out.delta)
	}
}
