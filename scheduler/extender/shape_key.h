// The assessment memo's key for a pod (assessment_memo.h): equal keys must mean equal verdicts
// and costs on every node, or the memo serves one pod's answer to another.
//
// The key is derived from the parsed request, not from a list kept by hand: it binds every field
// of model::PodRequest and model::ContainerRequest by structured binding, so a field added to
// either struct fails to compile here until it is either encoded or named as one that cannot
// change a verdict (the pod's identity, its priority, a container's name). shape_key_test.cc mutates every
// field of a parsed pod and checks that the key changes with each encoded one and that the
// identity fields change neither the key nor any verdict.
//
// Thread safety: a pure function.
#pragma once

#include <string>

#include "model/model.h"

namespace gpupack::extender {

// Every field of `pod` that Evaluate depends on, self-delimited (no two requests that differ in
// one of them spell the same key). Not its namespace, name or UID, nor its containers' names.
std::string ShapeKey(const model::PodRequest& pod);

}  // namespace gpupack::extender
