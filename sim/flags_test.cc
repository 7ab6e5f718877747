#include "sim/flags.h"

#include <gtest/gtest.h>

#include "sim/policy.h"

namespace gpupack::sim {
namespace {

TEST(SimFlagsTest, Defaults) {
  StatusOr<SimFlags> f = ParseSimFlags({"--cluster", "c.yaml", "--workload", "w.yaml"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->seeds_text, "42-51");
  EXPECT_EQ(f->options.tune, 1.3);
  EXPECT_TRUE(f->options.shuffle);
  EXPECT_EQ(f->options.fill_pods, 0) << "the whole cluster";
  EXPECT_EQ(PoliciesToRun(*f), std::vector<std::string>{"gpupack"});
}

// A running extender keeps its ledger: one seed unless --seeds says otherwise; it alone is
// replayed unless --policy adds in-process policies after it.
TEST(SimFlagsTest, ExtenderDefaultsToOneSeedAndRunsFirst) {
  StatusOr<SimFlags> f = ParseSimFlags({"--cluster", "c", "--extender", "http://x"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->seeds_text, "42");
  EXPECT_EQ(PoliciesToRun(*f), std::vector<std::string>{"extender"});
  f = ParseSimFlags({"--cluster", "c", "--extender", "http://x", "--seeds", "7", "--policy", "fgd,,binpack"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->seeds_text, "7");
  EXPECT_EQ(PoliciesToRun(*f), (std::vector<std::string>{"extender", "fgd", "binpack"}));
}

TEST(SimFlagsTest, BadInputNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message_prefix;
  };
  const Case cases[] = {
      {{"--bogus"}, "unknown argument \"--bogus\"\nusage:"},
      {{"--workload", "w"}, "--cluster is required\nusage:"},
      {{"--cluster"}, "--cluster needs a file"},
      {{"--cluster", "c", "--tune", "abc"}, "--tune: \"abc\" is not a number in 0..100"},
      {{"--cluster", "c", "--tune", "101"}, "--tune: \"101\" is not a number in 0..100"},
      {{"--cluster", "c", "--extender-weight", "0.5"}, "--extender-weight must be at least 1"},
      {{"--cluster", "c", "--fill-pods", "0"}, "--fill-pods: \"0\" is not a number of pods in 1..1000000"},
      {{"--cluster", "c", "--fill-pods", "5x"}, "--fill-pods: \"5x\" is not a number of pods in 1..1000000"},
      {{"--cluster", "c", "--process-overhead", "lots"}, "--process-overhead: \"lots\" is neither auto nor a quantity"},
      {{"--cluster", "c", "--process-overhead", "512Ki"}, "--process-overhead: \"512Ki\" is neither auto nor"},
      {{"--cluster", "c", "--process-overhead"}, "--process-overhead needs auto or a quantity"},
  };
  for (const Case& c : cases) {
    StatusOr<SimFlags> f = ParseSimFlags(c.args);
    ASSERT_FALSE(f.ok()) << c.message_prefix;
    EXPECT_EQ(f.status().message().rfind(c.message_prefix, 0), 0u) << f.status().message();
  }
}

// The gpupack-overhead policy charges each family's default unless one figure is given, in MiB.
TEST(SimFlagsTest, ProcessOverheadIsAutoOrOneQuantity) {
  StatusOr<SimFlags> f = ParseSimFlags({"--cluster", "c"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->options.overhead.mode, placement::ProcessOverheadMode::kFamilyDefault);
  f = ParseSimFlags({"--cluster", "c", "--process-overhead", "27Mi"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->options.overhead.mode, placement::ProcessOverheadMode::kFixed);
  EXPECT_EQ(f->options.overhead.mib, 27);
}

TEST(SimFlagsTest, UsageListsEveryPolicy) {
  const std::string usage = SimUsage();
  for (const std::string& name : PolicyNames()) EXPECT_NE(usage.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace gpupack::sim
