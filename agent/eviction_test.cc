#include "agent/eviction.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace gpupack::agent {
namespace {

using std::chrono::seconds;

class RecordingEvictor : public PodEvictor {
 public:
  StatusOr<kube::EvictionAnswer> Evict(const PodInfo& pod) override {
    evicted.push_back(pod.Key());
    if (!next_error.ok()) return next_error;
    return kube::EvictionAnswer{!blocked, blocked ? "The disruption budget web needs 2 healthy pods" : ""};
  }
  Status EmitPodWarning(const PodInfo& pod, std::string_view reason, const std::string& message) override {
    events.push_back(pod.Key() + " " + std::string(reason) + ": " + message);
    return Status::Ok();
  }

  bool blocked = false;
  Status next_error;
  std::vector<std::string> evicted;
  std::vector<std::string> events;
};

PodInfo Pod(const std::string& uid, const std::string& name) {
  PodInfo p;
  p.uid = uid;
  p.ns = "ml";
  p.name = name;
  return p;
}

api::GpuNodeAuditFinding Foreign(const std::string& pod_uid, int64_t pid) {
  api::GpuNodeAuditFinding f;
  f.kind = std::string(api::kAuditForeignProcess);
  f.device = "GPU-1";
  f.pod_uid = pod_uid;
  f.pid = pid;
  f.message = "process " + std::to_string(pid) + " uses GPU-1";
  return f;
}

class EvictionTest : public ::testing::Test {
 protected:
  ForeignPodEvictions Policy(bool enabled = true) {
    return ForeignPodEvictions(EvictionOptions{enabled, seconds(60)}, &evictor_, &clock_);
  }
  std::vector<std::string_view> Results(const std::vector<EvictionAttempt>& attempts) {
    std::vector<std::string_view> out;
    for (const EvictionAttempt& a : attempts) out.push_back(a.result);
    return out;
  }

  FakeClock clock_;
  RecordingEvictor evictor_;
  const std::vector<PodInfo> pods_ = {Pod("uid-web", "web")};
  const std::vector<api::GpuNodeAuditFinding> findings_ = {Foreign("uid-web", 10)};
};

TEST_F(EvictionTest, OffByDefault) {
  EXPECT_FALSE(EvictionOptions{}.enabled);
  ForeignPodEvictions policy = Policy(false);
  for (int i = 0; i < 5; ++i, clock_.Advance(seconds(60))) EXPECT_TRUE(policy.Run(findings_, pods_).empty());
  EXPECT_TRUE(evictor_.evicted.empty());
}

TEST_F(EvictionTest, EvictsOnceTheFindingHeldForAnIntervalAndNotAgainWhileTerminating) {
  ForeignPodEvictions policy = Policy();
  EXPECT_TRUE(policy.Run(findings_, pods_).empty());  // first seen
  clock_.Advance(seconds(30));
  EXPECT_TRUE(policy.Run(findings_, pods_).empty());
  clock_.Advance(seconds(30));
  std::vector<EvictionAttempt> attempts = policy.Run(findings_, pods_);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].pod, "ml/web");
  EXPECT_EQ(attempts[0].result, kEvictionEvicted);
  EXPECT_EQ(evictor_.events, std::vector<std::string>{
                                 "ml/web GpupackForeignPodEvicted: evicted by gpupack-agent: process 10 uses GPU-1"});
  // The API server marks it for deletion; its process may run through the grace period.
  std::vector<PodInfo> terminating = pods_;
  terminating[0].terminating = true;
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(60));
    EXPECT_TRUE(policy.Run(findings_, terminating).empty());
  }
  EXPECT_EQ(evictor_.evicted.size(), 1u);
}

TEST_F(EvictionTest, ABudgetsRefusalIsRetriedOncePerIntervalAndToldOnce) {
  evictor_.blocked = true;
  ForeignPodEvictions policy = Policy();
  policy.Run(findings_, pods_);
  clock_.Advance(seconds(60));
  EXPECT_EQ(Results(policy.Run(findings_, pods_)), std::vector<std::string_view>{kEvictionBlockedByPdb});
  clock_.Advance(seconds(30));
  EXPECT_TRUE(policy.Run(findings_, pods_).empty()) << "one attempt per pod per interval";
  clock_.Advance(seconds(30));
  EXPECT_EQ(Results(policy.Run(findings_, pods_)), std::vector<std::string_view>{kEvictionBlockedByPdb});
  EXPECT_EQ(evictor_.evicted.size(), 2u);
  ASSERT_EQ(evictor_.events.size(), 1u) << "a repeated refusal is logged and counted, not a new event";
  EXPECT_EQ(evictor_.events[0],
            "ml/web GpupackEvictionBlocked: eviction refused by a PodDisruptionBudget (The disruption budget web needs "
            "2 healthy pods), asking again in 60s: process 10 uses GPU-1");
  // The budget allows it later: the next attempt evicts, and says so.
  evictor_.blocked = false;
  clock_.Advance(seconds(60));
  EXPECT_EQ(Results(policy.Run(findings_, pods_)), std::vector<std::string_view>{kEvictionEvicted});
  EXPECT_EQ(evictor_.events.size(), 2u);
}

TEST_F(EvictionTest, FailuresAreCountedAndRetried) {
  evictor_.next_error = Status::Unavailable("POST …/eviction: HTTP 503");
  ForeignPodEvictions policy = Policy();
  policy.Run(findings_, pods_);
  clock_.Advance(seconds(60));
  std::vector<EvictionAttempt> attempts = policy.Run(findings_, pods_);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].result, kEvictionFailed);
  EXPECT_NE(attempts[0].message.find("HTTP 503"), std::string::npos) << attempts[0].message;
  EXPECT_NE(evictor_.events[0].find("GpupackEvictionFailed"), std::string::npos);
  evictor_.next_error = Status::Ok();
  clock_.Advance(seconds(60));
  EXPECT_EQ(Results(policy.Run(findings_, pods_)), std::vector<std::string_view>{kEvictionEvicted});
}

TEST_F(EvictionTest, HostProcessesAndUnknownPodsAreReportedOnly) {
  ForeignPodEvictions policy = Policy();
  const std::vector<api::GpuNodeAuditFinding> findings = {Foreign("", 17), Foreign("uid-elsewhere", 18)};
  for (int i = 0; i < 3; ++i, clock_.Advance(seconds(60))) EXPECT_TRUE(policy.Run(findings, pods_).empty());
  EXPECT_TRUE(evictor_.evicted.empty());
}

TEST_F(EvictionTest, OneAttemptPerPodWhateverItsProcesses) {
  ForeignPodEvictions policy = Policy();
  const std::vector<api::GpuNodeAuditFinding> findings = {Foreign("uid-web", 10), Foreign("uid-web", 11)};
  policy.Run(findings, pods_);
  clock_.Advance(seconds(60));
  EXPECT_EQ(policy.Run(findings, pods_).size(), 1u);
}

TEST_F(EvictionTest, AStrayThatStoppedStartsOverWhenItComesBack) {
  ForeignPodEvictions policy = Policy();
  policy.Run(findings_, pods_);
  clock_.Advance(seconds(50));
  policy.Run({}, pods_);  // gone for a pass
  clock_.Advance(seconds(10));
  EXPECT_TRUE(policy.Run(findings_, pods_).empty()) << "seen again just now";
  clock_.Advance(seconds(60));
  EXPECT_EQ(policy.Run(findings_, pods_).size(), 1u);
}

}  // namespace
}  // namespace gpupack::agent
