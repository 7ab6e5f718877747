package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// plugin answers the runtime's NRI requests. It keeps no state about pods or containers: every
// CreateContainer is decided from the pod and container the runtime hands over, so a restarted
// plugin has nothing to rebuild and Synchronize only marks it registered.
type plugin struct {
	status           *status
	exemptNamespaces []string
	mpsPipeDirectory string // the node's MPS pipe directory, "" = none
}

func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	log.Printf("registered with the runtime's NRI: %d pods, %d containers running (each is left as it was created)",
		len(pods), len(containers))
	p.status.setConnected(true)
	return nil, nil
}

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	who := fmt.Sprintf("%s/%s container %s", pod.GetNamespace(), pod.GetName(), ctr.GetName())
	d, err := decide(decisionRequest{Namespace: pod.GetNamespace(), ExemptNamespaces: p.exemptNamespaces,
		Annotations: pod.GetAnnotations(), Container: ctr.GetName(), Env: ctr.GetEnv(),
		MpsPipeDirectory: p.mpsPipeDirectory})
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
