#include "webhook/device_env.h"

#include <gtest/gtest.h>

namespace gpupack::webhook {
namespace {

using nlohmann::json;

json Value(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }

json FieldRef(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", path}}}}}};
}

TEST(ReviewContainerEnv, RefusesWhatPicksDevicesAndKeepsTheRestInOrder) {
  json env = json::array({
      Value("A", "1"),
      Value("NVIDIA_VISIBLE_DEVICES", "all"),
      Value("B", "2"),
      Value("CUDA_MPS_PIPE_DIRECTORY", "/tmp/mps"),
      {{"name", "CUDA_VISIBLE_DEVICES"}, {"valueFrom", {{"configMapKeyRef", {{"name", "gpus"}, {"key", "ids"}}}}}},
      FieldRef("NVIDIA_GPU_MEMORY_LIMIT", "metadata.annotations['gpupack.io/c0-memory-limit-mib']"),
      Value("NVIDIA_VISIBLE_DEVICES", "$(DEVICES)"),
      Value("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
      Value("NVIDIA_VISIBLE_DEVICES", "none"),
      {{"name", "NVIDIA_VISIBLE_DEVICES"}},  // no value: the empty string
      Value("CUDA_VISIBLE_DEVICES", "-1"),
      Value("C", "3"),
  });
  ContainerEnvReview review = ReviewContainerEnv(env, json::array());
  EXPECT_EQ(review.refused,
            (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_VISIBLE_DEVICES",
                                      "NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_VISIBLE_DEVICES"}));
  EXPECT_EQ(review.env, json::array({env[0], env[2], env[7], env[8], env[9], env[10], env[11]}));
}

TEST(ReviewContainerEnv, GpupacksOwnEntriesAreNotTheUsersAndGoFirst) {
  const json own =
      json::array({FieldRef("NVIDIA_VISIBLE_DEVICES", "metadata.annotations['gpupack.io/c1-visible-devices']"),
                   FieldRef("NVIDIA_GPU_MEMORY_LIMIT", "metadata.annotations['gpupack.io/c1-memory-limit-mib']")});
  // As a pod that went through the webhook carries them: accepted, not duplicated.
  json env = json::array({own[0], own[1], Value("A", "1")});
  ContainerEnvReview review = ReviewContainerEnv(env, own);
  EXPECT_TRUE(review.refused.empty());
  EXPECT_EQ(review.env, env);
  // Another container's annotation is not this container's own.
  env = json::array(
      {Value("A", "1"), FieldRef("NVIDIA_VISIBLE_DEVICES", "metadata.annotations['gpupack.io/c0-visible-devices']")});
  review = ReviewContainerEnv(env, own);
  EXPECT_EQ(review.refused, std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES"});
  EXPECT_EQ(review.env, json::array({own[0], own[1], env[0]}));
  // A no-device value of a name gpupack sets loses to gpupack's (the later entry would win);
  // one of a name gpupack does not set stays.
  env = json::array({Value("NVIDIA_VISIBLE_DEVICES", "void"), Value("CUDA_VISIBLE_DEVICES", "")});
  review = ReviewContainerEnv(env, own);
  EXPECT_TRUE(review.refused.empty());
  EXPECT_EQ(review.env, json::array({own[0], own[1], env[1]}));
}

TEST(ReviewContainerEnv, NoEnvOrAnEnvOfOddShapes) {
  EXPECT_EQ(ReviewContainerEnv(json(), json::array()).env, json::array());
  json odd = json::array({7, json::object(), {{"name", 3}}, {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", 0}}});
  ContainerEnvReview review = ReviewContainerEnv(odd, json::array());
  EXPECT_EQ(review.refused, std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES"});  // a value that is no string
  EXPECT_EQ(review.env, json::array({odd[0], odd[1], odd[2]}));
}

}  // namespace
}  // namespace gpupack::webhook
