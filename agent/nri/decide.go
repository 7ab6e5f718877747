package main

// The decision is the C++ function agent::DecideContainerEnv (agent/injection.h), linked in through
// its C entry (agent/injection_c.h). CMake builds the static libraries and hands them to cgo in
// CGO_LDFLAGS (agent/nri/CMakeLists.txt); this file only carries JSON across.

/*
#cgo CFLAGS: -I${SRCDIR}/../..
#include <stdlib.h>
#include "agent/injection_c.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"
)

// envDecision is what the C++ decision answers for one container.
type envDecision struct {
	Set    [][2]string `json:"set"`    // NAME, value: set, replacing a variable of that name
	Mounts []string    `json:"mounts"` // host directories bind-mounted at the same path
	Exempt bool        `json:"exempt"` // the pod's namespace is exempt: nothing set
	Error  string      `json:"error"`  // set when no decision can be made
}

type decisionRequest struct {
	Namespace        string            `json:"namespace"`
	ExemptNamespaces []string          `json:"exemptNamespaces"`
	Annotations      map[string]string `json:"annotations"`
	Container        string            `json:"container"`
	Env              []string          `json:"env"`
	MpsPipeDirectory string            `json:"mpsPipeDirectory"`
}

// decide asks the C++ decision for the env of one container: its pod's namespace and
// annotations, its name and env, and the namespaces whose pods keep their env.
func decide(request decisionRequest) (envDecision, error) {
	in, err := json.Marshal(request)
	if err != nil {
		return envDecision{}, err
	}
	cin := C.CBytes(in)
	defer C.free(cin)
	out := C.gpupack_decide_container_env((*C.char)(cin), C.size_t(len(in)))
	if out == nil {
		return envDecision{}, errors.New("the decision ran out of memory")
	}
	defer C.free(unsafe.Pointer(out))
	var d envDecision
	if err := json.Unmarshal([]byte(C.GoString(out)), &d); err != nil {
		return envDecision{}, fmt.Errorf("the decision's answer: %w", err)
	}
	if d.Error != "" {
		return envDecision{}, errors.New(d.Error)
	}
	return d, nil
}
