#include "agent/http_server.h"

#include <httplib.h>

#include <gtest/gtest.h>

namespace gpupack::agent {
namespace {

TEST(HttpServerTest, ServesMetricsAndHealth) {
  AgentMetrics metrics("n1");
  metrics.CountReport("written");
  metrics.SetBuildInfo(BuildInfo{"0.1.0", "0123456789ab"});
  std::string reason;
  auto server = HttpServer::Start("127.0.0.1", 0, &metrics, [&] { return reason; });
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("gpupack_agent_reports_total{node=\"n1\",result=\"written\"} 1"), std::string::npos);
  EXPECT_NE(res->body.find("gpupack_build_info{revision=\"0123456789ab\",version=\"0.1.0\"} 1\n"), std::string::npos)
      << res->body;
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\n");
  reason = "agent loop stalled";
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "agent loop stalled\n");
  res = client.Get("/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  (*server)->Stop();
}

TEST(HttpServerTest, UnbindableAddressIsAClearError) {
  AgentMetrics metrics("n1");
  // TEST-NET-3: never a local address, so bind fails with EADDRNOTAVAIL.
  auto server = HttpServer::Start("203.0.113.1", 0, &metrics, nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().message(), "cannot listen on 203.0.113.1:0");
}

TEST(HttpServerTest, StopRightAfterStartReturns) {
  AgentMetrics metrics("n1");
  auto server = HttpServer::Start("127.0.0.1", 0, &metrics, nullptr);
  ASSERT_TRUE(server.ok());
  (*server)->Stop();
}

}  // namespace
}  // namespace gpupack::agent
