#include "kube/informer.h"

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "testing/eventually.h"
#include "testing/test_apiserver.h"

namespace gpupack::kube {
namespace {

using builders::Eventually;

struct Recorder {
  std::mutex mu;
  std::multiset<std::string> added, deleted;
  int updates = 0;
  InformerHandlers Handlers() {
    return {[this](const Json& o) {
              std::lock_guard<std::mutex> l(mu);
              added.insert(ObjectKey(o));
            },
            [this](const Json&, const Json&) {
              std::lock_guard<std::mutex> l(mu);
              ++updates;
            },
            [this](const Json& o) {
              std::lock_guard<std::mutex> l(mu);
              deleted.insert(ObjectKey(o));
            },
            nullptr};
  }
  size_t AddedCount(const std::string& key) {
    std::lock_guard<std::mutex> l(mu);
    return added.count(key);
  }
  size_t DeletedCount(const std::string& key) {
    std::lock_guard<std::mutex> l(mu);
    return deleted.count(key);
  }
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    e2e::TestApiServerOptions o;
    o.bookmark_interval = std::chrono::milliseconds(20);
    server_ = std::make_unique<e2e::TestApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    Config c;
    c.server = server_->url();
    RetryPolicy p;
    p.initial_backoff = std::chrono::milliseconds(1);
    client_ = std::move(Client::Create(c, p)).value();
    opts_.initial_backoff = std::chrono::milliseconds(1);
    opts_.max_backoff = std::chrono::milliseconds(10);
  }
  Status CreatePod(const std::string& name) {
    return client_->Create(PodsResource(), "ns", {{"metadata", {{"name", name}}}, {"spec", Json::object()}}).status();
  }

  std::unique_ptr<e2e::TestApiServer> server_;
  std::unique_ptr<Client> client_;
  InformerOptions opts_;
};

TEST_F(InformerTest, ListsThenWatches) {
  ASSERT_TRUE(CreatePod("a").ok());
  Recorder rec;
  Informer inf(client_.get(), PodsResource(), opts_, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(rec.AddedCount("ns/a"), 1u);
  ASSERT_TRUE(CreatePod("b").ok());
  ASSERT_TRUE(client_->Delete(PodsResource(), "ns", "a").ok());
  ASSERT_TRUE(Eventually([&] { return rec.DeletedCount("ns/a") == 1 && inf.Get("ns/b").has_value(); }));
  EXPECT_FALSE(inf.Get("ns/a").has_value());
  EXPECT_EQ(inf.List().size(), 1u);
  // Bookmarks advance the resourceVersion even with no changes.
  ASSERT_TRUE(client_->Create(NodesResource(), "", {{"metadata", {{"name", "unrelated"}}}}).ok());
  const std::string want = std::to_string(server_->resource_version());
  EXPECT_TRUE(Eventually([&] { return inf.LastResourceVersion() == want; }));
  inf.Stop();
}

TEST_F(InformerTest, ResumesAfterDroppedWatchWithoutDuplicates) {
  Recorder rec;
  Informer inf(client_.get(), PodsResource(), opts_, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(CreatePod("a").ok());
  ASSERT_TRUE(Eventually([&] { return rec.AddedCount("ns/a") == 1; }));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Eventually([&] { return server_->open_watches() == 1; }));
    server_->DropWatches();
    ASSERT_TRUE(CreatePod("p" + std::to_string(i)).ok());  // may land while no watch is open
  }
  ASSERT_TRUE(Eventually([&] { return rec.AddedCount("ns/p2") == 1; }));
  EXPECT_EQ(rec.AddedCount("ns/a"), 1u);
  EXPECT_EQ(rec.AddedCount("ns/p0"), 1u);
  EXPECT_EQ(rec.AddedCount("ns/p1"), 1u);
  EXPECT_GE(inf.stats().watch_restarts, 3u);
  EXPECT_EQ(inf.stats().relists, 0u);
  inf.Stop();
}

TEST_F(InformerTest, RelistsOnGoneAndDeliversMissedDeletes) {
  ASSERT_TRUE(CreatePod("keep").ok());
  ASSERT_TRUE(CreatePod("doomed").ok());
  Recorder rec;
  Informer inf(client_.get(), PodsResource(), opts_, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(Eventually([&] { return server_->open_watches() == 1; }));
  // The history is compacted and the stream dropped: the resume gets 410, the informer relists and
  // sees that "doomed" disappeared while it was not watching.
  e2e::Faults refuse_watches;  // the informer cannot resume until we are done
  refuse_watches.watch_error_rate = 1.0;
  server_->SetFaults(refuse_watches);
  server_->DropWatches();
  ASSERT_TRUE(client_->Delete(PodsResource(), "ns", "doomed").ok());
  ASSERT_TRUE(CreatePod("new").ok());
  server_->CompactHistory();
  server_->SetFaults({});
  ASSERT_TRUE(Eventually([&] { return rec.DeletedCount("ns/doomed") == 1 && rec.AddedCount("ns/new") == 1; }));
  EXPECT_EQ(rec.AddedCount("ns/keep"), 1u);
  EXPECT_TRUE(inf.Get("ns/keep").has_value());
  EXPECT_FALSE(inf.Get("ns/doomed").has_value());
  EXPECT_GE(inf.stats().relists, 1u);
  inf.Stop();
}

TEST_F(InformerTest, TransformTrimsAndFilters) {
  ASSERT_TRUE(client_
                  ->Create(PodsResource(), "ns",
                           {{"metadata", {{"name", "kept"}, {"labels", {{"gpu", "yes"}}}}}, {"spec", Json::object()}})
                  .ok());
  ASSERT_TRUE(CreatePod("ignored").ok());
  opts_.transform = [](Json& o) {
    o["metadata"].erase("uid");  // trimmed
    return o["metadata"].value("labels", Json::object()).contains("gpu");
  };
  Recorder rec;
  Informer inf(client_.get(), PodsResource(), opts_, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(rec.AddedCount("ns/kept"), 1u);
  EXPECT_EQ(rec.AddedCount("ns/ignored"), 0u);
  ASSERT_TRUE(inf.Get("ns/kept").has_value());
  EXPECT_FALSE(inf.Get("ns/kept")->at("metadata").contains("uid"));
  // The label goes away: the object leaves the cache as a deletion.
  ASSERT_TRUE(
      client_->Patch(PodsResource(), "ns", "kept", PatchType::kMerge, {{"metadata", {{"labels", {{"gpu", nullptr}}}}}})
          .ok());
  ASSERT_TRUE(Eventually([&] { return rec.DeletedCount("ns/kept") == 1; }));
  EXPECT_FALSE(inf.Get("ns/kept").has_value());
  inf.Stop();
}

TEST_F(InformerTest, KeepsRetryingUntilTheServerAnswers) {
  e2e::Faults f;
  f.error_rate = 1.0;
  server_->SetFaults(f);
  Recorder rec;
  Informer inf(client_.get(), PodsResource(), opts_, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return inf.stats().errors >= 2; }));
  EXPECT_FALSE(inf.HasSynced());
  server_->SetFaults({});
  EXPECT_TRUE(inf.WaitForSync(std::chrono::seconds(10)));
  inf.Stop();
}

}  // namespace
}  // namespace gpupack::kube
