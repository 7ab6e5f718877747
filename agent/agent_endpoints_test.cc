// The agent's endpoints as cmd/agent wires them on the shared server: the metrics registry on
// /metrics, the loop's health on /healthz.
#include <httplib.h>

#include <gtest/gtest.h>

#include "agent/metrics.h"
#include "server/http_server.h"

namespace gpupack::agent {
namespace {

TEST(AgentEndpoints, ServeMetricsAndHealth) {
  AgentMetrics metrics("n1");
  metrics.CountReport("written");
  metrics.SetBuildInfo(BuildInfo{"0.1.0", "0123456789ab"});
  std::string reason;
  server::HttpServerOptions options;
  options.component = "agent";
  options.health = [&] { return reason; };
  server::HttpServer http(options);
  http.AddMetrics([&metrics] { return metrics.Collect(); });
  StatusOr<std::string> address = http.Start("127.0.0.1:0");
  ASSERT_TRUE(address.ok()) << address.status();
  httplib::Client client("127.0.0.1", http.port());
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
}

}  // namespace
}  // namespace gpupack::agent
