#include "webhook/flags.h"

#include <gtest/gtest.h>

namespace gpupack::webhook {
namespace {

TEST(WebhookFlagsTest, TheThreeRequiredFlagsAndAConfig) {
  StatusOr<WebhookFlags> f = ParseWebhookFlags(
      {"--listen", ":8443", "--tls-cert-file", "tls.crt", "--tls-key-file", "tls.key", "--config", "webhook.yaml"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->help);
  EXPECT_EQ(f->listen, ":8443");
  EXPECT_EQ(f->tls_cert_file, "tls.crt");
  EXPECT_EQ(f->tls_key_file, "tls.key");
  EXPECT_EQ(f->config_path, "webhook.yaml");
  StatusOr<WebhookFlags> without_config =
      ParseWebhookFlags({"--listen", "[::1]:0", "--tls-cert-file", "c", "--tls-key-file", "k"});
  ASSERT_TRUE(without_config.ok()) << without_config.status();
  EXPECT_EQ(without_config->config_path, "");
}

TEST(WebhookFlagsTest, HelpStopsParsing) {
  StatusOr<WebhookFlags> f = ParseWebhookFlags({"--help", "--bogus"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->help);
}

TEST(WebhookFlagsTest, BadInputNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;  // the whole message, or its start when it ends with the usage
    bool with_usage;
  };
  const std::vector<std::string> tls = {"--tls-cert-file", "c", "--tls-key-file", "k"};
  auto with_tls = [&](std::vector<std::string> args) {
    args.insert(args.end(), tls.begin(), tls.end());
    return args;
  };
  const Case cases[] = {
      {{"--bogus", "x"}, "unknown flag --bogus\n", true},
      {{"--listen"}, "--listen needs a value", false},
      {{"--listen", ":8443", "--tls-cert-file", "c"},
       "--listen, --tls-cert-file and --tls-key-file are required\n",
       true},
      {with_tls({"--listen", "8443"}), "--listen 8443: expected HOST:PORT", false},
      {with_tls({"--listen", "host:99999"}), "--listen host:99999: expected HOST:PORT", false},
  };
  for (const Case& c : cases) {
    StatusOr<WebhookFlags> f = ParseWebhookFlags(c.args);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), c.with_usage ? c.message + kWebhookUsage : c.message);
  }
}

}  // namespace
}  // namespace gpupack::webhook
