package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
)

// plugin answers the runtime's NRI requests. It keeps no state about pods or containers: every
// CreateContainer is decided from the pod and container the runtime hands over, and MPS
// namespaces are named after the container's id, so a restarted plugin has nothing to rebuild:
// Synchronize marks it registered and reconciles the MPS daemon with the containers listed.
type plugin struct {
	status               *status
	exemptNamespaces     []string
	mps                  mpsServer
	mpsDefaultPercentage int       // the ceiling put on the server's default namespace, 0 = none
	releases             *releaser // nil without an MPS server
}

func (p *plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	log.Printf("registered with the runtime's NRI: %d pods, %d containers running (each is left as it was created)",
		len(pods), len(containers))
	p.status.setConnected(true)
	if p.mps.Server == "" {
		return nil, nil
	}
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		byID[pod.GetId()] = pod
	}
	request := reconcileRequest{mpsServer: p.mps.withBudget(ctx), ExemptNamespaces: p.exemptNamespaces,
		DefaultPercentage: p.mpsDefaultPercentage}
	for _, ctr := range containers {
		request.Containers = append(request.Containers, containerOf(byID[ctr.GetPodSandboxId()], ctr))
	}
	// Within the registration's deadline (the runtime creates no container meanwhile, so no
	// namespace is made while the daemon is compared with the list). Not fatal to registration:
	// containers are still created with their namespaces, and the next registration reconciles
	// what is left.
	if err := reconcileNamespaces(request); err != nil {
		log.Printf("MPS namespaces on server %s not reconciled: %v", p.mps.Server, err)
	} else {
		log.Printf("MPS namespaces on server %s reconciled with %d running containers", p.mps.Server, len(containers))
	}
	return nil, nil
}

func (p *plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	who := fmt.Sprintf("%s/%s container %s", pod.GetNamespace(), pod.GetName(), ctr.GetName())
	d, err := decide(decisionRequest{mpsServer: p.mps.withBudget(ctx), runtimeContainer: containerOf(pod, ctr),
		ExemptNamespaces: p.exemptNamespaces, Env: ctr.GetEnv()})
	if err != nil {
		p.status.countContainer("refused")
		log.Printf("refused %s: %v", who, err)
		return nil, nil, fmt.Errorf("gpupack: %s: %w", who, err)
	}
	adjust := &api.ContainerAdjustment{}
	set := make([]string, 0, len(d.Set))
	for _, kv := range d.Set {
		// Removed first, so that a value an earlier plugin set is replaced rather than a conflict
		// that fails the creation (NRI lets a plugin touch what another set once it removed it).
		adjust.RemoveEnv(kv[0])
		adjust.AddEnv(kv[0], kv[1])
		set = append(set, kv[0]+"="+kv[1])
	}
	// The MPS pipe directory, mounted by the runtime: the pod spec needs no hostPath for it.
	for _, dir := range d.Mounts {
		adjust.AddMount(&api.Mount{Destination: dir, Source: dir, Type: "bind", Options: []string{"rbind", "rw"}})
		set = append(set, "mount "+dir)
	}
	if d.MpsNamespace != "" {
		set = append(set, "mps-namespace "+d.MpsNamespace)
	}
	switch {
	case d.Exempt:
		p.status.countContainer("exempt")
		return nil, nil, nil
	case len(set) == 0: // its env already gives no device
		p.status.countContainer("unchanged")
		return nil, nil, nil
	}
	p.status.countContainer("adjusted")
	log.Printf("%s: %s", who, strings.Join(set, " "))
	return adjust, nil, nil
}

// StopContainer hands the container's MPS namespace to the releaser and answers at once: the
// delete waits for its client to detach, which a stop must not wait for.
func (p *plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.release(pod, ctr)
	return nil, nil
}

// RemoveContainer releases again, for a container removed without a stop the plugin saw.
func (p *plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.release(pod, ctr)
	return nil
}

func (p *plugin) release(pod *api.PodSandbox, ctr *api.Container) {
	if p.releases != nil {
		p.releases.add(releaseRequest{mpsServer: p.mps, runtimeContainer: containerOf(pod, ctr),
			ExemptNamespaces: p.exemptNamespaces})
	}
}

// releaser deletes the MPS namespaces of stopped containers in the background. The daemon refuses
// to delete a namespace while a client is attached, and a container's client may still be
// detaching when it stops, so a refusal is kept and asked again every interval; a namespace the
// releaser never gets to (the plugin restarted) is deleted by the next registration's reconcile.
type releaser struct {
	interval time.Duration
	status   *status
	wake     chan struct{}
	mu       sync.Mutex
	pending  map[string]releaseRequest // by container id
}

func newReleaser(interval time.Duration, st *status) *releaser {
	return &releaser{interval: interval, status: st, wake: make(chan struct{}, 1),
		pending: map[string]releaseRequest{}}
}

func (r *releaser) add(request releaseRequest) {
	r.mu.Lock()
	r.pending[request.ContainerID] = request
	r.status.setPendingReleases(len(r.pending))
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run releases what is pending whenever some is added, and every interval, until ctx ends.
func (r *releaser) run(ctx context.Context) {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-ticker.C:
		}
		r.pass()
	}
}

func (r *releaser) pass() {
	r.mu.Lock()
	requests := make([]releaseRequest, 0, len(r.pending))
	for _, request := range r.pending {
		requests = append(requests, request)
	}
	r.mu.Unlock()
	for _, request := range requests {
		id := request.ContainerID
		retry, err := releaseNamespace(request)
		if err != nil && retry {
			continue
		}
		if err != nil {
			log.Printf("MPS namespace of container %s not released: %v", id, err)
		}
		r.mu.Lock()
		delete(r.pending, id)
		r.status.setPendingReleases(len(r.pending))
		r.mu.Unlock()
	}
}
