// The C entry to agent::DecideContainerEnv (agent/injection.h) for the NRI plugin, a Go program that
// calls it through cgo (agent/nri/): the decision stays one C++ function, the plugin only applies it.
//
// Thread safety: reentrant; it keeps no state.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// `request`: `size` bytes of JSON,
//   {"namespace": "ml", "exemptNamespaces": ["gpu-operator", …], "mpsPipeDirectory": "/tmp/nvidia-mps",
//    "annotations": {"gpupack.io/allocation": "…", …}, "container": "main", "env": ["NAME=value", …]}.
// Returns NUL-terminated JSON that the caller releases with free():
//   {"set": [["NAME", "value"], …], "mounts": ["/tmp/nvidia-mps"], "exempt": false}
// or, when no decision can be made (a malformed request, an allocation that does not decode),
//   {"error": "…"}.
// NULL only when memory runs out.
char* gpupack_decide_container_env(const char* request, size_t size);

#ifdef __cplusplus
}
#endif
