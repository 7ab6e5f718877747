// gpupack-webhook: the mutating admission webhook (docs/webhook.md). Parses flags, loads the
// config, serves until SIGTERM or SIGINT, then drains (in-flight reviews finish, idle keep-alive
// connections close).

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "server/http_server.h"
#include "webhook/config.h"
#include "webhook/flags.h"
#include "webhook/routes.h"

namespace {

int Fail(const std::string& message) { return gpupack::FailStartup("gpupack-webhook", message); }

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  StatusOr<webhook::WebhookFlags> parsed = webhook::ParseWebhookFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return Fail(parsed.status().message());
  const webhook::WebhookFlags& flags = *parsed;
  if (flags.help) {
    std::fputs(webhook::kWebhookUsage, stdout);
    return 0;
  }
  webhook::Config config;
  if (!flags.config_path.empty()) {
    StatusOr<webhook::Config> loaded = webhook::LoadConfig(flags.config_path);
    if (!loaded.ok()) return Fail(loaded.status().ToString());
    config = *loaded;
  }

  const StopSignals stop_signals;  // before any thread starts

  webhook::WebhookRoutes routes(config, BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION});
  server::HttpServer http(
      webhook::WebhookServerOptions(config, flags.tls_cert_file, flags.tls_key_file, SystemClock::Instance()));
  routes.Register(http);
  StatusOr<std::string> address = http.Start(flags.listen);
  if (!address.ok()) return Fail(address.status().ToString());
  std::cout << *address << std::endl;
  GPUPACK_LOG(kInfo, "webhook") << "serving AdmissionReviews on " << *address << ", scheduler " << config.scheduler_name
                                << ", failurePolicy " << webhook::FailurePolicyName(config.failure_policy)
                                << ", userDeviceEnv " << webhook::UserDeviceEnvPolicyName(config.user_device_env);

  const int signal_number = stop_signals.Wait();
  GPUPACK_LOG(kInfo, "webhook") << "signal " << signal_number << ": draining";
  http.Drain();
  return 0;
}
