// The test cases of the pod annotation table (api/pod_annotations.h), shared by every reader of
// it: the table's own test, the pod parser's (translate) and the simulator's workload file's, so
// each reader is checked against the same values and messages, and a new row's cases reach all of
// them. pod_annotations_test.cc fails until every user row has an accepted and a refused case.
// Every reader reads them for a pod with one gpupack container, "main", asking for
// gpupack.io/gpu-memory 8Gi on one device (what gpupack.io/gpu-memory-limit is measured against).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpupack::api::testing {

using Annotations = std::map<std::string, std::string>;

// Annotations a pod sets, and what the table's rows write back for the request read from them:
// the canonical form (lists trimmed, defaults left out, what one row implies for another).
struct AcceptedCase {
  Annotations set;
  Annotations written;
};

inline const std::vector<AcceptedCase> kAcceptedCases = {
    {{{"gpupack.io/device-kind", "gpu"}}, {{"gpupack.io/device-kind", "gpu"}}},
    {{{"gpupack.io/device-kind", "any"}}, {}},
    // A profile asks for a MIG instance.
    {{{"gpupack.io/mig-profile", "1g.10gb"}},
     {{"gpupack.io/device-kind", "mig"}, {"gpupack.io/mig-profile", "1g.10gb"}}},
    {{{"gpupack.io/device-kind", "mig"}, {"gpupack.io/mig-profile", ""}}, {{"gpupack.io/device-kind", "mig"}}},
    {{{"gpupack.io/gpu-model", "A100 | H100"}}, {{"gpupack.io/gpu-model", "A100|H100"}}},
    {{{"gpupack.io/isolation", "hard"}}, {{"gpupack.io/isolation", "hard"}}},
    {{{"gpupack.io/isolation", "best-effort"}}, {}},
    {{{"gpupack.io/movable", "true"}}, {{"gpupack.io/movable", "true"}}},
    {{{"gpupack.io/movable", "false"}}, {}},
    {{{"gpupack.io/gpu-model", "A100"}, {"gpupack.io/gpu-model-exclude", "Tesla T4|V100"}},
     {{"gpupack.io/gpu-model", "A100"}, {"gpupack.io/gpu-model-exclude", "Tesla T4|V100"}}},
    {{{"gpupack.io/gpu-uuids", "GPU-a1, GPU-b2"}, {"gpupack.io/gpu-uuids-exclude", "MIG-c3"}},
     {{"gpupack.io/gpu-uuids", "GPU-a1,GPU-b2"}, {"gpupack.io/gpu-uuids-exclude", "MIG-c3"}}},
    {{{"gpupack.io/node-policy", "spread"}, {"gpupack.io/device-policy", "binpack"}},
     {{"gpupack.io/node-policy", "spread"}, {"gpupack.io/device-policy", "binpack"}}},
    // "default" leaves the cluster's policy; "fgd" names it explicitly.
    {{{"gpupack.io/node-policy", "default"}, {"gpupack.io/device-policy", "fgd"}},
     {{"gpupack.io/device-policy", "fgd"}}},
    {{{"gpupack.io/spread-key", "web-frontend"}, {"gpupack.io/spread-scope", "node"}},
     {{"gpupack.io/spread-key", "web-frontend"}, {"gpupack.io/spread-scope", "node"}}},
    {{{"gpupack.io/spread-key", "web"}, {"gpupack.io/spread-scope", "device"}}, {{"gpupack.io/spread-key", "web"}}},
    // A ceiling for the pod's one container, bare or named; one equal to the request is no burst.
    {{{"gpupack.io/gpu-memory-limit", "16Gi"}}, {{"gpupack.io/gpu-memory-limit", "16384Mi"}}},
    {{{"gpupack.io/gpu-memory-limit", "main = 12Gi"}}, {{"gpupack.io/gpu-memory-limit", "12288Mi"}}},
    {{{"gpupack.io/gpu-memory-limit", "8Gi"}}, {}},
};

// Annotations a pod sets that are refused, and the message. The refusing annotation is the last
// of `set` in table order (a row refuses a conflict with the rows above it), so a reader that
// places messages (the workload file) can point at it.
struct RefusedCase {
  Annotations set;
  std::string message;
};

inline const std::vector<RefusedCase> kRefusedCases = {
    {{{"gpupack.io/device-kind", "tpu"}}, "annotation gpupack.io/device-kind: \"tpu\" is not gpu, mig or any"},
    {{{"gpupack.io/mig-profile", "small"}},
     "annotation gpupack.io/mig-profile: \"small\" is not a MIG profile name like 1g.10gb"},
    {{{"gpupack.io/device-kind", "gpu"}, {"gpupack.io/mig-profile", "1g.10gb"}},
     "annotation gpupack.io/mig-profile \"1g.10gb\" conflicts with gpupack.io/device-kind: gpu"},
    {{{"gpupack.io/gpu-model", "A100||H100"}},
     "annotation gpupack.io/gpu-model: \"A100||H100\" has an empty model name"},
    {{{"gpupack.io/isolation", "strict"}}, "annotation gpupack.io/isolation: \"strict\" is not hard or best-effort"},
    {{{"gpupack.io/isolation", ""}}, "annotation gpupack.io/isolation: \"\" is not hard or best-effort"},
    {{{"gpupack.io/movable", "yes"}}, "annotation gpupack.io/movable: \"yes\" is not true or false"},
    {{{"gpupack.io/gpu-model-exclude", "T4|"}},
     "annotation gpupack.io/gpu-model-exclude: \"T4|\" has an empty model name"},
    {{{"gpupack.io/gpu-model", "A100"}, {"gpupack.io/gpu-model-exclude", "A100"}},
     "annotation gpupack.io/gpu-model-exclude: \"A100\" is also in gpupack.io/gpu-model"},
    {{{"gpupack.io/gpu-uuids", "3f2a"}},
     "annotation gpupack.io/gpu-uuids: \"3f2a\" is not a device UUID like GPU-3f2a… or MIG-9c1b… (separate several "
     "with commas)"},
    {{{"gpupack.io/gpu-uuids", "GPU-a,,GPU-b"}}, "annotation gpupack.io/gpu-uuids: \"GPU-a,,GPU-b\" has an empty UUID"},
    {{{"gpupack.io/gpu-uuids", "GPU-a|GPU-b"}},
     "annotation gpupack.io/gpu-uuids: \"GPU-a|GPU-b\" is not a device UUID like GPU-3f2a… or MIG-9c1b… (separate "
     "several with commas)"},
    {{{"gpupack.io/gpu-uuids-exclude", "GPU-a,"}},
     "annotation gpupack.io/gpu-uuids-exclude: \"GPU-a,\" has an empty UUID"},
    {{{"gpupack.io/gpu-uuids", "GPU-a"}, {"gpupack.io/gpu-uuids-exclude", "GPU-a"}},
     "annotation gpupack.io/gpu-uuids-exclude: \"GPU-a\" is also in gpupack.io/gpu-uuids"},
    {{{"gpupack.io/node-policy", "mostallocated"}},
     "annotation gpupack.io/node-policy: \"mostallocated\" is not binpack, spread, fgd or default"},
    {{{"gpupack.io/device-policy", "Spread"}},
     "annotation gpupack.io/device-policy: \"Spread\" is not binpack, spread, fgd or default"},
    {{{"gpupack.io/spread-key", "web frontend"}},
     "annotation gpupack.io/spread-key: \"web frontend\" is not 1-63 letters, digits, '-', '_' or '.' starting and "
     "ending with a letter or digit"},
    {{{"gpupack.io/spread-key", std::string(64, 'a')}},
     "annotation gpupack.io/spread-key: \"" + std::string(64, 'a') +
         "\" is not 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"},
    {{{"gpupack.io/spread-key", "web"}, {"gpupack.io/spread-scope", "zone"}},
     "annotation gpupack.io/spread-scope: \"zone\" is not device or node"},
    {{{"gpupack.io/spread-scope", "node"}}, "annotation gpupack.io/spread-scope needs gpupack.io/spread-key"},
    {{{"gpupack.io/gpu-memory-limit", "lots"}},
     "annotation gpupack.io/gpu-memory-limit: \"lots\" is not a quantity like 16Gi, or NAME=QUANTITY naming a "
     "container"},
    {{{"gpupack.io/gpu-memory-limit", "=16Gi"}},
     "annotation gpupack.io/gpu-memory-limit: \"=16Gi\" is not a quantity like 16Gi, or NAME=QUANTITY naming a "
     "container"},
    {{{"gpupack.io/gpu-memory-limit", "16Gi,"}},
     "annotation gpupack.io/gpu-memory-limit: \"16Gi,\" has an empty entry"},
    // 4 GiB = 4096 MiB < the 8192 MiB the container is guaranteed.
    {{{"gpupack.io/gpu-memory-limit", "4Gi"}},
     "annotation gpupack.io/gpu-memory-limit: container \"main\": \"4Gi\" is below its gpupack.io/gpu-memory of "
     "8192 MiB; the ceiling is the most it may use, at least what it is guaranteed"},
    {{{"gpupack.io/gpu-memory-limit", "sidecar=16Gi"}},
     "annotation gpupack.io/gpu-memory-limit: \"sidecar\" is not a container of this pod that asks for "
     "gpupack.io/gpu-memory (the pod's are: main)"},
    {{{"gpupack.io/gpu-memory-limit", "main=16Gi,main=20Gi"}},
     "annotation gpupack.io/gpu-memory-limit: names container \"main\" twice"},
    {{{"gpupack.io/isolation", "hard"}, {"gpupack.io/gpu-memory-limit", "16Gi"}},
     "annotation gpupack.io/gpu-memory-limit: conflicts with gpupack.io/isolation: hard, which holds a container to "
     "its gpupack.io/gpu-memory (no burst above it); drop one of the two"},
};

}  // namespace gpupack::api::testing
