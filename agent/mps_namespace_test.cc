#include "agent/mps_namespace.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpupack::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MpsNamespaceName, IsThePrefixTheReadableIdAndTheWholeIdsHash) {
  // FNV-1a 64 of "abc" is 0xe71fa2190541574b (the published test vector).
  EXPECT_EQ(*MpsNamespaceName("abc"), "gpupack_abc_e71fa2190541574b");
  // Only the first 12 characters are kept readable, upper case lowered, the rest of [^a-z0-9_] → _.
  StatusOr<std::string> long_id = MpsNamespaceName("Ab-C.0123456789abcdef");
  ASSERT_TRUE(long_id.ok());
  EXPECT_THAT(*long_id, ::testing::StartsWith("gpupack_ab_c_0123456_"));
  EXPECT_EQ(long_id->size(), std::string("gpupack_").size() + 12 + 1 + 16);
  EXPECT_TRUE(IsGpupackMpsNamespace(*long_id));
  // Ids that read the same still get their own namespaces.
  EXPECT_NE(*MpsNamespaceName("0123456789ab-one"), *MpsNamespaceName("0123456789ab-two"));
  EXPECT_EQ(MpsNamespaceName("").status().code(), StatusCode::kInvalidArgument);
}

TEST(MpsNamespaceName, NamesAreLowerCaseDigitsAndUnderscoresUpTo64) {
  EXPECT_TRUE(IsMpsName("shared_1"));
  EXPECT_TRUE(IsMpsName(std::string(64, 'a')));
  EXPECT_FALSE(IsMpsName(std::string(65, 'a')));
  EXPECT_FALSE(IsMpsName(""));
  EXPECT_FALSE(IsMpsName("Shared"));
  EXPECT_FALSE(IsMpsName("a-b"));
  EXPECT_TRUE(IsMpsName(*MpsNamespaceName(std::string(200, 'X'))));
}

TEST(MpsNamespaceName, OnlyGpupacksNamesAreItsOwn) {
  EXPECT_FALSE(IsGpupackMpsNamespace("default"));
  EXPECT_FALSE(IsGpupackMpsNamespace("gpupack_"));
  EXPECT_FALSE(IsGpupackMpsNamespace("kai_abc_0123"));
  EXPECT_FALSE(IsGpupackMpsNamespace("gpupack_Upper"));
  EXPECT_TRUE(IsGpupackMpsNamespace("gpupack_x"));
}

TEST(CheckMpsPipeDirectory, RefusesRelativeAndTooLongDirectories) {
  EXPECT_TRUE(CheckMpsPipeDirectory("/tmp/nvidia-mps/shared.gpupack_abc").ok());
  EXPECT_EQ(CheckMpsPipeDirectory("tmp/mps").code(), StatusCode::kInvalidArgument);
  const std::string at_limit = "/" + std::string(kMaxMpsPipeDirectoryLength - 1, 'a');
  EXPECT_TRUE(CheckMpsPipeDirectory(at_limit).ok());
  Status over = CheckMpsPipeDirectory(at_limit + "a");
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("84 characters, over 83"));
}

TEST(PlanMpsReconcile, RestoresLostClaimsAndRemovesOnlyGpupacksUnclaimedNamespaces) {
  const std::vector<std::string> existing{"default", "gpupack_live_1", "gpupack_gone_2", "kai_other_3", "list"};
  const std::vector<MpsNamespaceClaim> claims{{"gpupack_live_1", 30}, {"gpupack_lost_4", 50}, {"gpupack_lost_4", 50}};
  const MpsReconcilePlan plan = PlanMpsReconcile(existing, claims);
  // gpupack_lost_4 is claimed by a running container, absent on the daemon: created once with its 50 %.
  ASSERT_EQ(plan.create.size(), 1u);
  EXPECT_EQ(plan.create[0].name, "gpupack_lost_4");
  EXPECT_EQ(plan.create[0].active_thread_percentage, 50);
  // gpupack_gone_2 is gpupack's and unclaimed; default, kai_other_3 and a stray token are not gpupack's.
  EXPECT_THAT(plan.remove, ElementsAre("gpupack_gone_2"));
}

// A pipe directory with the fake daemon's control file and one server, "shared".
class FakeMpsDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupack-mps-XXXXXX";  // short: pipe directories are length-checked
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/control").put('\n');
    fs::create_directories(dir_ + "/fake-state/servers");
    std::ofstream(dir_ + "/fake-state/servers/shared").put('\n');
  }
  void TearDown() override { fs::remove_all(dir_); }

  MpsControl Control(std::string server = "shared") const {
    return MpsControl({.binary = GPUPACK_FAKE_MPS_CONTROL, .pipe_directory = dir_, .server = std::move(server)});
  }
  std::string Percent(const std::string& name) const {
    std::ifstream in(dir_ + "/fake-state/shared/" + name + "/percent");
    std::string p;
    in >> p;
    return p;
  }
  void Attach(const std::string& name) const {
    std::ofstream(dir_ + "/fake-state/shared/" + name + "/attached").put('\n');
  }
  void Detach(const std::string& name) const { fs::remove(dir_ + "/fake-state/shared/" + name + "/attached"); }
  bool Exists(const std::string& name) const { return fs::is_directory(dir_ + "/fake-state/shared/" + name); }

  std::string dir_;
};

TEST_F(FakeMpsDaemon, ProvisionCreatesCapsAndAnswersTheNamespacesOwnPipeDirectory) {
  const MpsControl control = Control();
  const std::string name = *MpsNamespaceName("c0ffee");
  StatusOr<std::string> pipe = ProvisionMpsNamespace(control, "c0ffee", 30);
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  EXPECT_EQ(*pipe, dir_ + "/shared/" + name);  // read from the daemon, not the server's own directory
  EXPECT_TRUE(fs::is_directory(*pipe));
  EXPECT_EQ(Percent(name), "30");
  // A retried CreateContainer: the same namespace, capped again.
  StatusOr<std::string> again = ProvisionMpsNamespace(control, "c0ffee", 30);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *pipe);
}

TEST_F(FakeMpsDaemon, ProvisionSpeaksProtocol3AndPassesTheDaemonsRefusalsOn) {
  MpsControlOptions options = Control().options();
  ASSERT_TRUE(ProvisionMpsNamespace(MpsControl(options), "abc", 100).ok());
  std::ifstream log(dir_ + "/fake-state/log");
  std::stringstream lines;
  lines << log.rdbuf();
  EXPECT_THAT(lines.str(), HasSubstr("-p 3 namespace create gpupack_abc_e71fa2190541574b --server=shared\n"));
  EXPECT_THAT(
      lines.str(),
      HasSubstr("-p 3 namespace set gpupack_abc_e71fa2190541574b --server=shared --active-thread-percentage=100\n"));
  EXPECT_THAT(lines.str(), HasSubstr("-p 3 namespace get gpupack_abc_e71fa2190541574b shared pipe-directory\n"));

  Status unknown_server = ProvisionMpsNamespace(Control("nope"), "abc", 10).status();
  EXPECT_EQ(unknown_server.code(), StatusCode::kUnavailable);
  EXPECT_THAT(unknown_server.message(), HasSubstr("Server 'nope' not found"));
  EXPECT_THAT(unknown_server.message(), HasSubstr("of container abc"));
  EXPECT_EQ(ProvisionMpsNamespace(Control(), "abc", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ProvisionMpsNamespace(Control(), "abc", 101).status().code(), StatusCode::kInvalidArgument);
}

// KAI's code for driver 615 asks for pipe_directory, the manual for pipe-directory: a daemon that
// knows only the older spelling is still read.
TEST_F(FakeMpsDaemon, PipeDirectoryIsReadUnderEitherSpellingOfTheField) {
  ::setenv("FAKE_MPS_PIPE_FIELD", "pipe_directory", 1);
  StatusOr<std::string> pipe = ProvisionMpsNamespace(Control(), "abc", 20);
  ::unsetenv("FAKE_MPS_PIPE_FIELD");
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  EXPECT_EQ(*pipe, dir_ + "/shared/" + *MpsNamespaceName("abc"));
}

TEST_F(FakeMpsDaemon, NoDaemonAndNoBinaryAreErrorsThatSaySo) {
  fs::remove(dir_ + "/control");
  Status down = ProvisionMpsNamespace(Control(), "abc", 10).status();
  EXPECT_THAT(down.message(), HasSubstr("Cannot find MPS control daemon process"));
  MpsControlOptions missing = Control().options();
  missing.binary = dir_ + "/no-such-binary";
  Status absent = MpsControl(missing).NamespaceNames().status();
  EXPECT_EQ(absent.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(absent.message(), HasSubstr("cannot run " + dir_ + "/no-such-binary"));
}

TEST_F(FakeMpsDaemon, ACommandPastItsTimeoutIsKilled) {
  const std::string slow = dir_ + "/slow.sh";
  std::ofstream(slow) << "#!/bin/sh\nsleep 30\n";
  fs::permissions(slow, fs::perms::owner_all);
  MpsControlOptions options = Control().options();
  options.binary = slow;
  options.timeout = std::chrono::milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  Status s = MpsControl(options).NamespaceNames().status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("no answer within 200 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // The request's deadline bounds it below the timeout, and no command starts once it passed.
  options.timeout = std::chrono::seconds(10);
  options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  const auto bounded = std::chrono::steady_clock::now();
  EXPECT_EQ(MpsControl(options).NamespaceNames().status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - bounded, std::chrono::seconds(5));
  // A provision whose first read gets no answer stops there: silence is not a missing namespace.
  options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  Status silent = ProvisionMpsNamespace(MpsControl(options), "abc", 10).status();
  EXPECT_EQ(silent.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(silent.message(), HasSubstr("namespace get"));
  EXPECT_THAT(silent.message(), ::testing::Not(HasSubstr("create")));
  options.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  Status late = MpsControl(options).NamespaceNames().status();
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.message(), HasSubstr("not run, the request's deadline passed"));
  options.deadline.reset();
  options.timeout = std::chrono::milliseconds(200);
  // One that closes its output and hangs is killed at the deadline too.
  std::ofstream(slow) << "#!/bin/sh\nexec >&- 2>&-\nsleep 30\n";
  EXPECT_EQ(MpsControl(options).NamespaceNames().status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(FakeMpsDaemon, ReleaseWaitsForTheClientAndIsDoneWhenTheNamespaceIsGone) {
  const MpsControl control = Control();
  const std::string name = *MpsNamespaceName("c1");
  ASSERT_TRUE(ProvisionMpsNamespace(control, "c1", 40).ok());
  Attach(name);
  Status busy = ReleaseMpsNamespace(control, "c1");
  EXPECT_EQ(busy.code(), StatusCode::kUnavailable);  // the caller retries
  EXPECT_THAT(busy.message(), HasSubstr("has active clients"));
  EXPECT_TRUE(Exists(name));
  Detach(name);
  EXPECT_TRUE(ReleaseMpsNamespace(control, "c1").ok());
  EXPECT_FALSE(Exists(name));
  EXPECT_TRUE(ReleaseMpsNamespace(control, "c1").ok());  // already gone
  // The daemon gone: so are its namespaces.
  ASSERT_TRUE(ProvisionMpsNamespace(control, "c2", 40).ok());
  fs::remove(dir_ + "/control");
  EXPECT_TRUE(ReleaseMpsNamespace(control, "c2").ok());
  // A daemon that does not answer settles nothing: asked again later.
  const std::string slow = dir_ + "/slow.sh";
  std::ofstream(slow) << "#!/bin/sh\nexec sleep 30\n";
  fs::permissions(slow, fs::perms::owner_all);
  MpsControlOptions silent = control.options();
  silent.binary = slow;
  silent.timeout = std::chrono::milliseconds(100);
  EXPECT_EQ(ReleaseMpsNamespace(MpsControl(silent), "c2").code(), StatusCode::kDeadlineExceeded);
}

TEST_F(FakeMpsDaemon, ReconcileCapsDefaultRestoresLostNamespacesAndRemovesUnclaimedOnes) {
  const MpsControl control = Control();
  const std::string live = *MpsNamespaceName("live"), gone = *MpsNamespaceName("gone"),
                    lost = *MpsNamespaceName("lost");
  ASSERT_TRUE(ProvisionMpsNamespace(control, "live", 25).ok());
  ASSERT_TRUE(ProvisionMpsNamespace(control, "gone", 25).ok());
  ASSERT_TRUE(control.CreateNamespace("someone_elses").ok());
  const std::vector<MpsNamespaceClaim> claims{{live, 25}, {lost, 60}};
  Status s = ReconcileMpsNamespaces(control, claims, 10);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Percent("default"), "10");
  EXPECT_TRUE(Exists(live));
  EXPECT_EQ(Percent(live), "25");
  EXPECT_TRUE(Exists(lost));
  EXPECT_EQ(Percent(lost), "60");
  EXPECT_FALSE(Exists(gone));
  EXPECT_TRUE(Exists("someone_elses"));
}

TEST_F(FakeMpsDaemon, ReconcileRunsEveryStepAndReportsTheFirstFailure) {
  const MpsControl control = Control();
  const std::string gone = *MpsNamespaceName("gone");
  ASSERT_TRUE(ProvisionMpsNamespace(control, "gone", 25).ok());
  Attach(gone);
  const std::vector<MpsNamespaceClaim> claims{{*MpsNamespaceName("lost"), 60}};
  Status s = ReconcileMpsNamespaces(control, claims, 10);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("deleting unclaimed MPS namespace " + gone));
  EXPECT_TRUE(Exists(*MpsNamespaceName("lost")));  // the step before still ran
}

}  // namespace
}  // namespace gpupack::agent
