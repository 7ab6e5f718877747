// The pod annotations of gpupack's contract (docs/annotations.md), each declared once as one row
// of one table: its name, who may write it, its key in the simulator's workload file, how a value
// is read into a model::PodRequest or refused, and how a request is written back as a value.
// Everything that knows pod annotations walks the table: the pod parser (translate::ParsePodRequest,
// for the webhook and the extender alike), the webhook's refusal of what only gpupack writes, the
// list of valid names that refusals give, the simulator's workload file and its HTTP replay. A new
// annotation is one row in pod_annotations.cc plus its cases in pod_annotations_test.cc, which
// fails until the row has them and docs/annotations.md lists it.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace gpupack::api {

// Who writes an annotation on a pod.
enum class AnnotationWriter {
  kUser,       // the pod's author; gpupack reads it (PodAnnotation::read)
  kWebhook,    // gpupack-webhook at admission; a pod that sets it itself is refused
  kScheduler,  // the extender at bind; likewise
};

struct PodAnnotation {
  // E.g. "gpupack.io/device-kind"; for a family of names (`matches`), the family as docs write it.
  std::string_view name;
  AnnotationWriter writer = AnnotationWriter::kUser;
  // The key that carries it in the simulator's workload file (docs/cluster-file.md); empty: none.
  std::string_view workload_key;
  // User rows: what a refused value fails to be, as Refuse words it ("is not gpu, mig or any").
  std::string_view refusal;
  // User rows: reads a value the pod sets into `request`, or refuses it (InvalidArgument naming
  // the annotation). Rows are read in table order, so a row may refuse a conflict with one above.
  Status (*read)(const PodAnnotation& self, std::string_view value, model::PodRequest& request) = nullptr;
  // User rows: the value that asks what `request` holds under this row, nullopt when that is the
  // default (no annotation). Reading the written values gives the same request.
  std::optional<std::string> (*write)(const model::PodRequest& request) = nullptr;
  // Component rows: what the annotation records, as the webhook's refusal explains it.
  std::string_view purpose;
  // A family of names rather than one: whether `key` is one of them. nullptr: `name` only.
  bool (*matches)(std::string_view key) = nullptr;

  bool Matches(std::string_view key) const { return matches != nullptr ? matches(key) : key == name; }
  // InvalidArgument `annotation NAME: "VALUE" REFUSAL`.
  Status Refuse(std::string_view value) const;
};

// Every row, in reading order.
std::span<const PodAnnotation> PodAnnotations();
// The row that `key` names, nullptr for none (a gpupack.io/ typo, or another vendor's name).
const PodAnnotation* FindPodAnnotation(std::string_view key);
// The names of the rows a user writes, in table order: the list that the refusal of an unknown
// gpupack.io/ annotation gives.
std::span<const std::string_view> UserAnnotationNames();

// What every user row writes for `request` (name → value): the annotations that ask for it.
std::map<std::string, std::string> WritePodAnnotations(const model::PodRequest& request);

// Splits "a|b" (or "a,b") into parts trimmed of spaces and tabs; InvalidArgument
// `annotation ANNOTATION: "TEXT" has an empty WHAT` when a part is empty.
StatusOr<std::vector<std::string>> SplitAnnotationList(std::string_view text, char separator,
                                                       std::string_view annotation, std::string_view what);

}  // namespace gpupack::api
