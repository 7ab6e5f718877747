// The C entries to node-side injection (agent/injection.h) and the MPS namespaces it provisions
// (agent/mps_namespace.h), for the NRI plugin, a Go program that calls them through cgo
// (agent/nri/): the decision stays C++, the plugin only applies it.
//
// Every request is `size` bytes of JSON; every answer NUL-terminated JSON the caller releases with
// free(), {"error": "…"} when nothing could be done (a malformed request, an allocation that does
// not decode, a namespace the MPS daemon refused), NULL only when memory runs out.
//
// MPS v3 namespaces are on when a request names "mpsServer" (with "mpsPipeDirectory", the daemon's
// pipe directory; "mpsControlBinary", default nvidia-cuda-mps-control; "budgetMs", when positive, the time the daemon's
// commands may take in all: what is left of the runtime's deadline for the request).
//
// Thread safety: reentrant; they keep no state (the namespaces' state is the MPS daemon's).
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// {"namespace": "ml", "exemptNamespaces": ["gpu-operator", …], "mpsPipeDirectory": "/tmp/nvidia-mps",
//  "annotations": {"gpupack.io/allocation": "…", …}, "container": "main", "containerId": "…",
//  "env": ["NAME=value", …], "mpsServer": …}
// → {"set": [["NAME", "value"], …], "mounts": ["/tmp/nvidia-mps"], "exempt": false,
//    "mpsNamespace": "gpupack_…" (when one was provisioned for the container)}
char* gpupack_decide_container_env(const char* request, size_t size);

// {"containerId": "…", "namespace": "ml", "exemptNamespaces": […], "container": "main",
//  "annotations": {…}, "mpsServer": …}: a stopped or removed container → {} once its namespace is
// gone (at once for one the decision gives none), or {"error":
// "…", "retry": true} while a client is still attached or the daemon does not answer (ask again
// later), "retry": false when asking again cannot help (the CLI cannot be run).
char* gpupack_release_mps_namespace(const char* request, size_t size);

// {"exemptNamespaces": […], "defaultPercentage": 10, "mpsServer": …, "containers": [{"containerId": "…",
//  "namespace": "ml", "container": "main", "annotations": {…}}, …]}: the runtime's live
// containers. Restores the namespaces of allocated ones that the daemon lost, deletes gpupack's
// namespaces no live container claims, caps `default` → {"claims": N} or {"error": "…"}.
char* gpupack_reconcile_mps_namespaces(const char* request, size_t size);

#ifdef __cplusplus
}
#endif
