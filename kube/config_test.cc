#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpupack::kube {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("gpupack_config_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path dir_;
};

constexpr char kKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: aGVsbG8=
- name: c2
  cluster:
    server: https://other:443
    certificate-authority: ca.pem
    insecure-skip-tls-verify: true
contexts:
- name: main
  context: {cluster: c1, user: u1, namespace: ml}
- name: alt
  context: {cluster: c2, user: u2}
- name: plugin
  context: {cluster: c1, user: u3}
users:
- name: u1
  user:
    token: abc
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: u2
  user:
    tokenFile: tok
- name: u3
  user:
    exec: {command: aws}
)";

TEST_F(ConfigTest, CurrentContextWithInlineData) {
  const std::string path = Write("kc", kKubeconfig);
  auto c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "hello");
  EXPECT_EQ(c->client_cert_pem, "cert");
  EXPECT_EQ(c->client_key_pem, "key");
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->default_namespace, "ml");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST_F(ConfigTest, NamedContextWithRelativeFiles) {
  Write("ca.pem", "CA");
  const std::string path = Write("kc", kKubeconfig);
  auto c = LoadKubeconfig(path, "alt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token_file, (dir_ / "tok").string());
  EXPECT_EQ(c->default_namespace, "default");
}

TEST_F(ConfigTest, ErrorsNameTheProblem) {
  const std::string path = Write("kc", kKubeconfig);
  auto missing = LoadKubeconfig(path, "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("context \"nope\""), std::string::npos) << missing.status();
  auto plugin = LoadKubeconfig(path, "plugin");
  EXPECT_EQ(plugin.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plugin.status().message().find("exec"), std::string::npos);
  EXPECT_EQ(LoadKubeconfig((dir_ / "absent").string()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadKubeconfig(Write("bad", "clusters: [")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadKubeconfig(Write("bad2", "current-context: x\ncontexts: 5\n")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ConfigTest, InCluster) {
  Write("token", "tok\n");
  Write("ca.crt", "CA");
  Write("namespace", "gpupack-system\n");
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto c = InClusterConfig(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->token_file, (dir_ / "token").string());
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->default_namespace, "gpupack-system");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConfig(dir_.string()).status().code(), StatusCode::kFailedPrecondition);
  ::unsetenv("KUBERNETES_SERVICE_PORT");
}

}  // namespace
}  // namespace gpupack::kube
