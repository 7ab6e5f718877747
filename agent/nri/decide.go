package main

// The decision is C++: agent::DecideContainerEnv (agent/injection.h) and the MPS namespaces it
// provisions (agent/mps_namespace.h), linked in through their C entries (agent/injection_c.h).
// CMake builds the static libraries and hands them to cgo in CGO_LDFLAGS (agent/nri/CMakeLists.txt);
// this file only carries JSON across.

/*
#cgo CFLAGS: -I${SRCDIR}/../..
#include <stdlib.h>
#include "agent/injection_c.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/containerd/nri/pkg/api"
)

// mpsServer names the node's MPS v3 server; with a Server, each allocated container gets an MPS
// namespace of its own capped at its compute share.
type mpsServer struct {
	PipeDirectory string `json:"mpsPipeDirectory"` // the daemon's pipe directory on the host
	Server        string `json:"mpsServer"`        // "" = no namespaces
	ControlBinary string `json:"mpsControlBinary"` // nvidia-cuda-mps-control
	BudgetMs      int64  `json:"budgetMs"`         // > 0: the time the daemon's commands may take in all
}

// answerMargin is the part of the runtime's deadline kept for carrying the answer back.
const answerMargin = 250 * time.Millisecond

// withBudget is s with the time its MPS commands may take: what ctx leaves of the runtime's
// deadline for the request (ttrpc carries it), less answerMargin, so that a slow daemon fails
// the request with its own message rather than a timeout.
func (s mpsServer) withBudget(ctx context.Context) mpsServer {
	if deadline, ok := ctx.Deadline(); ok {
		s.BudgetMs = max(1, (time.Until(deadline) - answerMargin).Milliseconds())
	}
	return s
}

// envDecision is what the C++ decision answers for one container.
type envDecision struct {
	Set          [][2]string `json:"set"`          // NAME, value: set, replacing a variable of that name
	Mounts       []string    `json:"mounts"`       // host directories bind-mounted at the same path
	Exempt       bool        `json:"exempt"`       // the pod's namespace is exempt: nothing set
	MpsNamespace string      `json:"mpsNamespace"` // the MPS namespace provisioned for it, if any
	Error        string      `json:"error"`        // set when no decision can be made
	Retry        bool        `json:"retry"`        // with Error from a release: ask again later
}

// runtimeContainer is a container as the runtime hands it over: what the decision reads of it.
type runtimeContainer struct {
	ContainerID string            `json:"containerId"`
	Namespace   string            `json:"namespace"` // its pod's
	Container   string            `json:"container"` // its name
	Annotations map[string]string `json:"annotations"`
}

func containerOf(pod *api.PodSandbox, ctr *api.Container) runtimeContainer {
	return runtimeContainer{ContainerID: ctr.GetId(), Namespace: pod.GetNamespace(), Container: ctr.GetName(),
		Annotations: pod.GetAnnotations()}
}

type decisionRequest struct {
	mpsServer
	runtimeContainer
	ExemptNamespaces []string `json:"exemptNamespaces"`
	Env              []string `json:"env"`
}

// releaseRequest names a stopped or removed container, so that the decision can tell whether it
// was given a namespace at all.
type releaseRequest struct {
	mpsServer
	runtimeContainer
	ExemptNamespaces []string `json:"exemptNamespaces"`
}

type reconcileRequest struct {
	mpsServer
	ExemptNamespaces  []string           `json:"exemptNamespaces"`
	DefaultPercentage int                `json:"defaultPercentage"`
	Containers        []runtimeContainer `json:"containers"`
}

type entry int

const (
	decideEntry entry = iota
	releaseEntry
	reconcileEntry
)

// call hands request to one C entry and decodes its answer; an answer with an error is returned
// with that error, so a caller can still read Retry.
func call(e entry, request any) (envDecision, error) {
	in, err := json.Marshal(request)
	if err != nil {
		return envDecision{}, err
	}
	cin := C.CBytes(in)
	defer C.free(cin)
	var out *C.char
	switch e {
	case decideEntry:
		out = C.gpupack_decide_container_env((*C.char)(cin), C.size_t(len(in)))
	case releaseEntry:
		out = C.gpupack_release_mps_namespace((*C.char)(cin), C.size_t(len(in)))
	case reconcileEntry:
		out = C.gpupack_reconcile_mps_namespaces((*C.char)(cin), C.size_t(len(in)))
	}
	if out == nil {
		return envDecision{}, errors.New("the decision ran out of memory")
	}
	defer C.free(unsafe.Pointer(out))
	var d envDecision
	if err := json.Unmarshal([]byte(C.GoString(out)), &d); err != nil {
		return envDecision{}, fmt.Errorf("the decision's answer: %w", err)
	}
	if d.Error != "" {
		return d, errors.New(d.Error)
	}
	return d, nil
}

// decide asks the C++ decision for the env of one container: its pod's namespace and
// annotations, its name, id and env, and the namespaces whose pods keep their env. With an MPS
// server it also provisions the container's namespace.
func decide(request decisionRequest) (envDecision, error) { return call(decideEntry, request) }

// releaseNamespace deletes a container's MPS namespace; retry is true while a client is attached.
func releaseNamespace(request releaseRequest) (retry bool, err error) {
	d, err := call(releaseEntry, request)
	return d.Retry, err
}

// reconcileNamespaces brings the MPS daemon in line with the runtime's live containers.
func reconcileNamespaces(request reconcileRequest) error {
	_, err := call(reconcileEntry, request)
	return err
}
