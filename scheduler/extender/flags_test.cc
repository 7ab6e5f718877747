#include "scheduler/extender/flags.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace gpupack::extender {
namespace {

TEST(ExtenderFlagsTest, NothingGivenIsNothingOverridden) {
  StatusOr<ExtenderFlags> f = ParseExtenderFlags({});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->help);
  EXPECT_FALSE(f->standalone_cluster || f->kubeconfig || f->config_path || f->listen || f->metrics_listen || f->policy);
  StatusOr<ExtenderConfig> config = ConfigOf(*f);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, ExtenderConfig{}.listen);
  EXPECT_EQ(config->policy, ExtenderConfig{}.policy);
}

TEST(ExtenderFlagsTest, FlagsOverrideTheConfigFile) {
  TempDir dir;
  const std::string path =
      dir.WriteFile("extender.yaml", "listen: 0.0.0.0:9999\nmetricsListen: 0.0.0.0:9998\npolicy: spread\nthreads: 2\n");
  StatusOr<ExtenderFlags> f = ParseExtenderFlags(
      {"--standalone-cluster", "cluster.yaml", "--config", path, "--listen", "127.0.0.1:0", "--policy", "binpack"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->standalone_cluster, "cluster.yaml");
  StatusOr<ExtenderConfig> config = ConfigOf(*f);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "127.0.0.1:0");
  EXPECT_EQ(config->metrics_listen, "0.0.0.0:9998") << "from the file: no --metrics-listen";
  EXPECT_EQ(config->policy, model::PolicyKind::kBinpack);
  EXPECT_EQ(config->threads, 2);
  StatusOr<ExtenderFlags> later_wins = ParseExtenderFlags({"--listen", ":1", "--listen", ":2"});
  ASSERT_TRUE(later_wins.ok());
  EXPECT_EQ(later_wins->listen, ":2");
}

TEST(ExtenderFlagsTest, HelpStopsParsing) {
  StatusOr<ExtenderFlags> f = ParseExtenderFlags({"--help", "--bogus"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->help);
}

TEST(ExtenderFlagsTest, BadCommandLinesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--bogus", "x"}, std::string("unknown flag --bogus\n") + kExtenderUsage},
      {{"--listen"}, "--listen needs a value"},
      {{"--standalone-cluster", "c.yaml", "--kubeconfig", "k"},
       "--standalone-cluster and --kubeconfig exclude each other"},
  };
  for (const Case& c : cases) {
    StatusOr<ExtenderFlags> f = ParseExtenderFlags(c.args);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), c.message);
  }
}

// The config file is read before --policy is looked at, so its errors come first.
TEST(ExtenderFlagsTest, ConfigErrorsThenPolicyErrors) {
  TempDir dir;
  StatusOr<ExtenderFlags> bad_policy = ParseExtenderFlags({"--policy", "fdg"});
  ASSERT_TRUE(bad_policy.ok()) << bad_policy.status();
  StatusOr<ExtenderConfig> config = ConfigOf(*bad_policy);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "--policy: expected fgd, binpack or spread, got \"fdg\"");
  StatusOr<ExtenderFlags> both = ParseExtenderFlags({"--config", dir.File("missing.yaml"), "--policy", "fdg"});
  ASSERT_TRUE(both.ok()) << both.status();
  config = ConfigOf(*both);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("missing.yaml"), std::string::npos) << config.status();
}

}  // namespace
}  // namespace gpupack::extender
