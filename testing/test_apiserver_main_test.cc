// The gpupack-test-apiserver binary: prints its bound address first, writes a usable kubeconfig,
// refuses bad flags.
#include <signal.h>

#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/config.h"
#include "testing/process.h"

namespace gpupack::e2e {
namespace {

TEST(TestApiServerBinary, PrintsAddressAndServesTheKubeconfigItWrote) {
  const std::string kubeconfig = ::testing::TempDir() + "/gpupack_test_apiserver_kubeconfig";
  auto p = Process::Start({GPUPACK_TEST_APISERVER, "--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig},
                          ::testing::TempDir() + "/gpupack_test_apiserver.log");
  ASSERT_TRUE(p.ok()) << p.status();
  auto line = p->ReadLine(std::chrono::seconds(10));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->rfind("127.0.0.1:", 0), 0u) << *line;
  auto config = kube::LoadKubeconfig(kubeconfig);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "http://" + *line);
  auto client = kube::Client::Create(*config);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Create(kube::NodesResource(), "", {{"metadata", {{"name", "n1"}}}}).ok());
  EXPECT_TRUE((*client)->GetNode("n1").ok());
  p->Kill(SIGTERM);
  EXPECT_FALSE(p->Running());
}

TEST(TestApiServerBinary, RefusesUnknownFlags) {
  auto p =
      Process::Start({GPUPACK_TEST_APISERVER, "--bogus", "1"}, ::testing::TempDir() + "/gpupack_test_apiserver.log");
  ASSERT_TRUE(p.ok());
  // Exits without printing an address.
  EXPECT_EQ(p->ReadLine(std::chrono::seconds(10)).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpupack::e2e
