#include "scheduler/extender/http_server.h"

#include <thread>

#include <httplib.h>
#include <gtest/gtest.h>

#include "scheduler/extender/test_util.h"

namespace gpupack::extender {
namespace {

using nlohmann::json;

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options) {
    ASSERT_TRUE(backend_.Start(state_).ok());
    server_ = std::make_unique<ExtenderServer>(extender_, &metrics_, options);
    StatusOr<std::string> address = server_->Bind("127.0.0.1:0");
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    serving_ = std::thread([this] { server_->Serve(); });
    const size_t colon = address_.rfind(':');
    client_ = std::make_unique<httplib::Client>(address_.substr(0, colon), std::stoi(address_.substr(colon + 1)));
    client_->set_keep_alive(true);
  }
  void TearDown() override {
    client_.reset();  // closes the kept-alive connection, so Stop need not wait for it to idle out
    if (server_) server_->Stop();
    if (serving_.joinable()) serving_.join();
  }

  FakeClock clock_;
  ClusterState state_{std::make_shared<core::Policy>(core::PolicyKind::kFgd, core::DefaultPriorWorkload(81920),
                                                     core::PlacementOptions{}),
                      clock_, std::chrono::seconds(0)};
  StandaloneBackend backend_{{testing::GpuNode("a", 2, 81920), testing::GpuNode("b", 1, 40960)}};
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "test"}};
  Extender extender_{state_, backend_, ExtenderOptions{}, clock_, &metrics_};
  std::unique_ptr<ExtenderServer> server_;
  std::thread serving_;
  std::string address_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, ServesTheVerbsUnderThePrefixOverOneKeptAliveConnection) {
  ServerOptions options;
  options.prefix = "/gpupack";
  Start(options);
  for (int i = 0; i < 3; ++i) {
    const std::string uid = "u" + std::to_string(i);
    auto filter = client_->Post("/gpupack/filter", testing::FilterBody(testing::PodJson("p", uid, "10Gi"), {"a", "b"}),
                                "application/json");
    ASSERT_TRUE(filter) << httplib::to_string(filter.error());
    EXPECT_EQ(filter->status, 200);
    EXPECT_EQ(filter->get_header_value("Content-Type"), "application/json");
    json f = json::parse(filter->body);
    ASSERT_FALSE(f["NodeNames"].empty()) << filter->body;
    auto prioritize = client_->Post("/gpupack/prioritize",
                                    testing::FilterBody(testing::PodJson("p", uid, "10Gi"), {"a", "b"}), "application/json");
    ASSERT_TRUE(prioritize);
    EXPECT_EQ(json::parse(prioritize->body).size(), 2u);
    auto bind = client_->Post("/gpupack/bind", testing::BindBody("p", uid, f["NodeNames"][0]), "application/json");
    ASSERT_TRUE(bind);
    EXPECT_EQ(json::parse(bind->body)["Error"], "") << bind->body;
  }
  EXPECT_EQ(backend_.binds().size(), 3u);
  auto missing = client_->Post("/filter", "{}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(HttpServerTest, HealthReadinessAndMetrics) {
  Start(ServerOptions{});
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpupack_nodes 2"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("gpupack_extender_ready 1"), std::string::npos);
}

TEST_F(HttpServerTest, OversizeBodiesAreRefusedWith413AndChangeNothing) {
  ServerOptions options;
  options.max_body_bytes = 4096;
  Start(options);
  std::string big = testing::FilterBody(testing::PodJson("p", "u", "10Gi"), std::vector<std::string>(2000, "a"));
  auto res = client_->Post("/filter", big, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  auto bind = client_->Post("/bind", testing::BindBody("p", "u", "a"), "application/json");
  ASSERT_TRUE(bind);
  EXPECT_NE(json::parse(bind->body)["Error"], "");
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(HttpServerTest, MalformedJsonGetsAProtocolErrorNotACrash) {
  Start(ServerOptions{});
  auto res = client_->Post("/filter", "{\"Pod\": [", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(json::parse(res->body)["Error"].get<std::string>().find("not valid JSON"), std::string::npos);
  auto prio = client_->Post("/prioritize", "nonsense", "application/json");
  ASSERT_TRUE(prio);
  EXPECT_EQ(prio->status, 400);
  EXPECT_EQ(client_->Get("/healthz")->status, 200) << "still serving";
}

TEST(ListenAddress, Parses) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(ParseListenAddress("127.0.0.1:0", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseListenAddress("[::1]:8888", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  ASSERT_TRUE(ParseListenAddress(":8888", &host, &port).ok());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_FALSE(ParseListenAddress("localhost", &host, &port).ok());
  EXPECT_FALSE(ParseListenAddress("h:99999", &host, &port).ok());
  EXPECT_FALSE(ParseListenAddress("h:", &host, &port).ok());
}

}  // namespace
}  // namespace gpupack::extender
