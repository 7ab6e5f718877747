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
      {{"--cluster", "c", "--burst"}, "--burst needs --fill-pods"},
      {{"--cluster", "c", "--fill-pods", "50", "--burst", "--extender", "http://x"}, "--burst replays in process"},
      {{"--cluster", "c", "--fill-pods", "50", "--burst", "--what-if", "beta:2,2"},
       "--what-if replays pods one at a time"},
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

TEST(SimFlagsTest, TimelineDefaultsAndItsFlags) {
  StatusOr<SimFlags> f = ParseSimFlags({"--cluster", "c", "--workload", "w", "--timeline"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->timeline);
  EXPECT_EQ(f->defrag_runs, (std::vector<bool>{false, true})) << "without, then with defragmentation";
  EXPECT_EQ(f->timeline_options.movable, Movability::kBestEffort);
  EXPECT_EQ(f->timeline_options.max_moves_per_hour, 60);
  EXPECT_EQ(f->timeline_options.move_cooldown_s, 600);
  EXPECT_EQ(f->timeline_options.arrival_speedup, 1);
  EXPECT_EQ(f->timeline_options.cluster_share, 1);

  f = ParseSimFlags({"--cluster", "c", "--timeline", "--defrag", "on", "--movable", "all", "--max-moves-per-hour", "0",
                     "--move-cooldown", "30", "--arrival-speedup", "100", "--cluster-share", "0.05"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->defrag_runs, std::vector<bool>{true});
  EXPECT_EQ(f->timeline_options.movable, Movability::kAll);
  EXPECT_EQ(f->timeline_options.max_moves_per_hour, 0);
  EXPECT_EQ(f->timeline_options.move_cooldown_s, 30);
  EXPECT_EQ(f->timeline_options.arrival_speedup, 100);
  EXPECT_EQ(f->timeline_options.cluster_share, 0.05);
  f = ParseSimFlags({"--cluster", "c", "--timeline", "--defrag", "off", "--movable", "none"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->defrag_runs, std::vector<bool>{false});
  EXPECT_EQ(f->timeline_options.movable, Movability::kNone);
}

TEST(SimFlagsTest, TimelineBadInputNamesTheFlagAndTheValue) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--defrag", "maybe"}, "--defrag: \"maybe\" is not off, on or both"},
      {{"--movable", "ls"}, "--movable: \"ls\" is not be, all or none"},
      {{"--max-moves-per-hour", "-1"}, "--max-moves-per-hour: \"-1\" is not a number of moves in 0..1000000"},
      {{"--max-moves-per-hour", "6x"}, "--max-moves-per-hour: \"6x\" is not a number of moves in 0..1000000"},
      {{"--move-cooldown", ""}, "--move-cooldown: \"\" is not a number of seconds in 0..100000000"},
      {{"--arrival-speedup", "0"}, "--arrival-speedup: \"0\" is not a positive number up to 1000000"},
      {{"--cluster-share", "1.5"}, "--cluster-share: \"1.5\" is not a share in (0, 1]"},
      {{"--cluster-share"}, "--cluster-share needs a value"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--cluster", "c", "--timeline"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    StatusOr<SimFlags> f = ParseSimFlags(args);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().message(), c.message);
  }
}

// The timeline replays gpupack alone in time order: the replay table's flags are refused with
// it, and its own flags without it.
TEST(SimFlagsTest, TimelineFlagsAndReplayFlagsDoNotMix) {
  StatusOr<SimFlags> f = ParseSimFlags({"--cluster", "c", "--timeline", "--tune", "2"});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "--tune does not apply to --timeline (gpupack alone, in time order)");
  f = ParseSimFlags({"--cluster", "c", "--timeline", "--policy", "fgd"});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "--policy does not apply to --timeline (gpupack alone, in time order)");
  f = ParseSimFlags({"--cluster", "c", "--defrag", "on"});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "--defrag needs --timeline");
}

TEST(SimFlagsTest, UsageListsEveryPolicy) {
  const std::string usage = SimUsage();
  for (const std::string& name : PolicyNames()) EXPECT_NE(usage.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace gpupack::sim
