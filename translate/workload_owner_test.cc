#include "translate/workload_owner.h"

#include <gtest/gtest.h>

namespace gpupack::translate {
namespace {

using Json = nlohmann::json;

Json PodOwnedBy(const std::string& kind, const std::string& name, bool controller = true,
                const std::string& template_hash = "") {
  Json pod = {{"metadata",
               {{"name", "p-0"},
                {"ownerReferences", Json::array({{{"kind", kind}, {"name", name}, {"controller", controller}}})}}}};
  if (!template_hash.empty()) pod["metadata"]["labels"] = {{"pod-template-hash", template_hash}};
  return pod;
}

TEST(WorkloadOfPod, ReadsADeploymentBackFromItsReplicaSet) {
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("ReplicaSet", "web-7d9f8c6b5", true, "7d9f8c6b5")),
            (WorkloadRef{"Deployment", "web"}));
  // A ReplicaSet of its own (no template hash, or a name that does not end in it) stays one.
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("ReplicaSet", "web")), (WorkloadRef{"ReplicaSet", "web"}));
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("ReplicaSet", "web", true, "abc")), (WorkloadRef{"ReplicaSet", "web"}));
}

TEST(WorkloadOfPod, TakesOtherControllersAsNamed) {
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("StatefulSet", "db")), (WorkloadRef{"StatefulSet", "db"}));
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("Job", "train-1")), (WorkloadRef{"Job", "train-1"}));
}

TEST(WorkloadOfPod, APodWithoutAControllerIsItsOwnWorkload) {
  EXPECT_EQ(WorkloadOfPod(PodOwnedBy("ConfigMap", "x", /*controller=*/false)), (WorkloadRef{"Pod", "p-0"}));
  EXPECT_EQ(WorkloadOfPod(Json{{"metadata", {{"name", "solo"}}}}), (WorkloadRef{"Pod", "solo"}));
  EXPECT_EQ(WorkloadOfPod(Json::array()), (WorkloadRef{"Pod", ""}));
}

}  // namespace
}  // namespace gpupack::translate
