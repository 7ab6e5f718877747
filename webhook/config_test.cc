#include "webhook/config.h"

#include <gtest/gtest.h>

namespace gpupack::webhook {
namespace {

TEST(WebhookConfig, EmptyTextGivesDefaults) {
  StatusOr<Config> config = ParseConfig("");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->scheduler_name, "gpupack-scheduler");
  EXPECT_FALSE(config->allow_custom_scheduler_name);
  EXPECT_EQ(config->failure_policy, FailurePolicy::kFail);
  EXPECT_EQ(config->user_device_env, UserDeviceEnvPolicy::kRefuse);
  EXPECT_EQ(config->max_devices_per_container, 16);
  EXPECT_EQ(config->max_device_memory_mib, 0);
}

TEST(WebhookConfig, ReadsEveryKey) {
  StatusOr<Config> config = ParseConfig(R"(
schedulerName: gpu-packer
allowCustomSchedulerName: true
failurePolicy: Ignore
userDeviceEnv: Strip
maxDevicesPerContainer: 8
maxDeviceMemory: 80Gi
certCheckIntervalSeconds: 3
workerThreads: 4
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->scheduler_name, "gpu-packer");
  EXPECT_TRUE(config->allow_custom_scheduler_name);
  EXPECT_EQ(config->failure_policy, FailurePolicy::kIgnore);
  EXPECT_EQ(config->user_device_env, UserDeviceEnvPolicy::kStrip);
  EXPECT_EQ(config->max_devices_per_container, 8);
  EXPECT_EQ(config->max_device_memory_mib, 80 * 1024);
  EXPECT_EQ(config->cert_check_interval, std::chrono::seconds(3));
  EXPECT_EQ(config->worker_threads, 4);
}

TEST(WebhookConfig, RefusesUnknownKeysNamingThem) {
  StatusOr<Config> config = ParseConfig("schedulerName: x\nfailurePolicyy: Fail\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("unknown config key \"failurePolicyy\""), std::string::npos)
      << config.status();
}

TEST(WebhookConfig, RefusesBadValuesNamingTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"failurePolicy: Deny", "failurePolicy"},
      {"userDeviceEnv: Allow", "userDeviceEnv"},
      {"userDeviceEnv: strip", "userDeviceEnv"},
      {"maxDevicesPerContainer: 0", "maxDevicesPerContainer"},
      {"maxDevicesPerContainer: many", "maxDevicesPerContainer"},
      {"maxDeviceMemory: lots", "maxDeviceMemory"},
      {"maxDeviceMemory: 0", "maxDeviceMemory"},
      {"allowCustomSchedulerName: perhaps", "allowCustomSchedulerName"},
      {"schedulerName: [a, b]", "schedulerName"},
      {"schedulerName: ''", "schedulerName"},
      {"workerThreads: -1", "workerThreads"},
      {"- a list", "mapping"},
      {"a: [unclosed", "invalid YAML"},
  };
  for (const Case& c : cases) {
    StatusOr<Config> config = ParseConfig(c.yaml);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_NE(config.status().message().find(c.expected), std::string::npos) << c.yaml << " -> " << config.status();
  }
}

// Accepted before: a scheduler name no kube-scheduler profile can carry, a key given twice.
TEST(WebhookConfig, RefusesAnInvalidSchedulerNameAndDuplicateKeysWithTheLine) {
  StatusOr<Config> bad_name = ParseConfig("failurePolicy: Fail\nschedulerName: \"Bad Name!\"\n");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_EQ(bad_name.status().message(),
            "line 2: config key schedulerName: \"Bad Name!\" is not a valid Kubernetes name (a DNS-1123 subdomain: at "
            "most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)");
  StatusOr<Config> twice = ParseConfig("schedulerName: a\nschedulerName: b\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "line 2: key \"schedulerName\" appears twice in one mapping (first on line 1)");
  EXPECT_TRUE(ParseConfig("schedulerName: gpupack-scheduler.v2\n").ok());
}

TEST(WebhookConfig, MissingFileIsNotFound) {
  StatusOr<Config> config = LoadConfig("/nonexistent/gpupack-webhook.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupack::webhook
