#include "scheduler/extender/routes.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include "testing/builders.h"
#include "testing/fake_clock.h"

namespace gpupack::extender {
namespace {

using nlohmann::json;

// Every configured knob reaches the Extender's options (each set away from its default).
TEST(ExtenderOptionsOfTest, CopiesEveryKnob) {
  ExtenderConfig config;
  config.decisive_filter = false;
  config.filter_band_mib = 512;
  config.neutral_non_gpu_pods = true;
  config.request_ratio = 0.5;
  config.max_devices_per_container = 4;
  config.remembered_pods = 7;
  config.remembered_ttl = std::chrono::minutes(3);
  config.reservation_ttl = std::chrono::seconds(30);
  config.filter_hold_ttl = std::chrono::seconds(7);
  config.fgd_score_levels = false;
  config.workload_refresh_pods = 0;
  const ExtenderOptions options = ExtenderOptionsOf(config);
  EXPECT_FALSE(options.decisive_filter);
  EXPECT_EQ(options.band_mib, 512);
  EXPECT_TRUE(options.neutral_non_gpu_pods);
  EXPECT_EQ(options.request_ratio, 0.5);
  EXPECT_EQ(options.max_devices_per_container, 4);
  EXPECT_EQ(options.remembered_pods, 7u);
  EXPECT_EQ(options.remembered_ttl, std::chrono::minutes(3));
  EXPECT_EQ(options.reservation_ttl, std::chrono::seconds(30));
  EXPECT_EQ(options.filter_hold_ttl, std::chrono::seconds(7));
  EXPECT_FALSE(options.decision.fgd_levels);
  EXPECT_EQ(options.decision.refresh_pods, 0);
}

// The metrics listener: one worker and no TLS even when the verbs' listener has it.
TEST(MetricsServerOptionsTest, OneWorkerPlainHttp) {
  ExtenderConfig config;
  config.threads = 8;
  config.bind_threads = 48;
  config.tls_cert_file = "cert.pem";
  config.tls_key_file = "key.pem";
  FakeClock clock;
  ClusterState state{builders::PriorPolicy(model::PolicyKind::kFgd), clock, std::chrono::seconds(0)};
  StandaloneBackend backend{{}};
  Extender extender{state, backend, ExtenderOptions{}, clock, nullptr};
  const server::HttpServerOptions verbs = ExtenderServerOptions(config, extender);
  const server::HttpServerOptions metrics = MetricsServerOptions(config, extender);
  EXPECT_EQ(verbs.worker_threads, 8);
  EXPECT_EQ(verbs.waiting_threads, 48);
  EXPECT_EQ(verbs.tls_cert_file, "cert.pem");
  EXPECT_EQ(metrics.worker_threads, 1);
  EXPECT_EQ(metrics.tls_cert_file, "");
  EXPECT_EQ(metrics.tls_key_file, "");
}

class HttpServerTest : public ::testing::Test {
 protected:
  // Serves the verbs under `prefix` with `config`'s server options, like cmd/extender.
  void Start(ExtenderConfig config = {}) {
    ASSERT_TRUE(backend_.Start(state_).ok());
    server_ = std::make_unique<server::HttpServer>(ExtenderServerOptions(config, extender_));
    RegisterVerbs(*server_, extender_, config.prefix);
    RegisterMetrics(*server_, extender_, metrics_);
    StatusOr<std::string> address = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    const size_t colon = address_.rfind(':');
    client_ = std::make_unique<httplib::Client>(address_.substr(0, colon), std::stoi(address_.substr(colon + 1)));
    client_->set_keep_alive(true);
  }

  FakeClock clock_;
  ClusterState state_{builders::PriorPolicy(model::PolicyKind::kFgd), clock_, std::chrono::seconds(0)};
  StandaloneBackend backend_{{builders::GpuNode("a", 2, 81920), builders::GpuNode("b", 1, 40960)}};
  ExtenderMetrics metrics_{&state_, true, BuildInfo{"0.1.0", "test"}};
  Extender extender_{state_, backend_, ExtenderOptions{}, clock_, &metrics_};
  std::unique_ptr<server::HttpServer> server_;
  std::string address_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, ServesTheVerbsUnderThePrefixOverOneKeptAliveConnection) {
  ExtenderConfig config;
  config.prefix = "/gpupack";
  Start(config);
  for (int i = 0; i < 3; ++i) {
    const std::string uid = "u" + std::to_string(i);
    auto filter = client_->Post(
        "/gpupack/filter", builders::FilterBody(builders::PodJson("p", uid, "10Gi"), {"a", "b"}), "application/json");
    ASSERT_TRUE(filter) << httplib::to_string(filter.error());
    EXPECT_EQ(filter->status, 200);
    EXPECT_EQ(filter->get_header_value("Content-Type"), "application/json");
    json f = json::parse(filter->body);
    ASSERT_FALSE(f["NodeNames"].empty()) << filter->body;
    auto prioritize =
        client_->Post("/gpupack/prioritize", builders::FilterBody(builders::PodJson("p", uid, "10Gi"), {"a", "b"}),
                      "application/json");
    ASSERT_TRUE(prioritize);
    EXPECT_EQ(json::parse(prioritize->body).size(), 2u);
    auto bind = client_->Post("/gpupack/bind", builders::BindBody("p", uid, f["NodeNames"][0]), "application/json");
    ASSERT_TRUE(bind);
    EXPECT_EQ(json::parse(bind->body)["Error"], "") << bind->body;
  }
  EXPECT_EQ(backend_.binds().size(), 3u);
  auto missing = client_->Post("/filter", "{}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(HttpServerTest, HealthReadinessAndMetrics) {
  Start();
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
  ExtenderConfig config;
  config.max_body_bytes = 4096;
  Start(config);
  std::string big = builders::FilterBody(builders::PodJson("p", "u", "10Gi"), std::vector<std::string>(2000, "a"));
  auto res = client_->Post("/filter", big, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  auto bind = client_->Post("/bind", builders::BindBody("p", "u", "a"), "application/json");
  ASSERT_TRUE(bind);
  EXPECT_NE(json::parse(bind->body)["Error"], "");
  EXPECT_EQ(state_.PodCount(), 0u);
}

TEST_F(HttpServerTest, MalformedJsonGetsAProtocolErrorNotACrash) {
  Start();
  auto res = client_->Post("/filter", "{\"Pod\": [", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(json::parse(res->body)["Error"].get<std::string>().find("not valid JSON"), std::string::npos);
  auto prio = client_->Post("/prioritize", "nonsense", "application/json");
  ASSERT_TRUE(prio);
  EXPECT_EQ(prio->status, 400);
  EXPECT_EQ(client_->Get("/healthz")->status, 200) << "still serving";
}

// `curl -d @args.json .../filter` sends application/x-www-form-urlencoded; a
// 10 KB body is an ExtenderArgs like any other, far below the 64 MiB limit.
TEST_F(HttpServerTest, AFormEncodedContentTypeIsDecodedAsJson) {
  Start();
  std::vector<std::string> names = {"a", "b"};
  for (int i = 0; i < 1000; ++i) names.push_back("absent-node-" + std::to_string(i));
  const std::string body = builders::FilterBody(builders::PodJson("p", "u", "10Gi"), names);
  ASSERT_GT(body.size(), 10000u);
  auto res = client_->Post("/filter", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  json f = json::parse(res->body);
  EXPECT_EQ(f["Error"], "");
  ASSERT_FALSE(f["NodeNames"].empty()) << res->body;
  for (const json& name : f["NodeNames"]) EXPECT_TRUE(name == "a" || name == "b") << res->body;
}

// A wrong method on a verb is 405 naming the allowed one, not 404.
TEST_F(HttpServerTest, AWrongMethodIs405WithAllow) {
  Start();
  auto res = client_->Get("/filter");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "POST");
  auto unknown = client_->Post("/filtre", "{}", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->body, "no such endpoint: POST /filtre\n");
}

}  // namespace
}  // namespace gpupack::extender
