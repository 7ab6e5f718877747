// gpupack-webhook: the mutating admission webhook (docs/webhook.md). Parses
// flags, loads the config, serves until SIGTERM or SIGINT.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "common/build_info.h"
#include "common/clock.h"
#include "common/log.h"
#include "webhook/config.h"
#include "webhook/server.h"

namespace {

constexpr const char* kUsage = R"(usage: gpupack-webhook --listen HOST:PORT --tls-cert-file FILE --tls-key-file FILE [--config FILE]

  --listen HOST:PORT     address to serve HTTPS on (":PORT" = all interfaces); port 0 picks
                         a free port. The bound address (HOST:PORT) is printed as the first
                         line on stdout.
  --tls-cert-file FILE   PEM certificate (leaf first, then any intermediates); re-read when it
                         changes, so a rotated Secret is served without a restart
  --tls-key-file FILE    PEM private key of that certificate
  --config FILE          YAML config (docs/webhook.md); defaults apply without one
Endpoints: POST /mutate (AdmissionReview admission.k8s.io/v1), GET /healthz, GET /metrics.
)";

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpupack-webhook: %s\n", message.c_str());
  return 2;
}

// "HOST:PORT", "[IPv6]:PORT", or ":PORT" for every IPv4 interface.
bool ParseListen(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return false;
  *host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  std::string digits = text.substr(colon + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *port = std::stoi(digits);
  return *port <= 65535;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupack;
  std::string listen_text, config_path;
  webhook::ListenOptions listen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string* target = arg == "--listen"          ? &listen_text
                          : arg == "--tls-cert-file" ? &listen.cert_file
                          : arg == "--tls-key-file"  ? &listen.key_file
                          : arg == "--config"        ? &config_path
                                                     : nullptr;
    if (target == nullptr) return Fail("unknown flag " + arg + "\n" + kUsage);
    if (i + 1 >= argc) return Fail(arg + " needs a value");
    *target = argv[++i];
  }
  if (listen_text.empty() || listen.cert_file.empty() || listen.key_file.empty()) {
    return Fail(std::string("--listen, --tls-cert-file and --tls-key-file are required\n") + kUsage);
  }
  if (!ParseListen(listen_text, &listen.host, &listen.port)) {
    return Fail("--listen " + listen_text + ": expected HOST:PORT");
  }
  listen.build = BuildInfo{GPUPACK_VERSION, GPUPACK_REVISION};
  webhook::Config config;
  if (!config_path.empty()) {
    StatusOr<webhook::Config> loaded = webhook::LoadConfig(config_path);
    if (!loaded.ok()) return Fail(loaded.status().ToString());
    config = *loaded;
  }

  // Block the stop signals before any thread starts, so only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  StatusOr<std::unique_ptr<webhook::Server>> server =
      webhook::Server::Start(listen, config, SystemClock::Instance());
  if (!server.ok()) return Fail(server.status().ToString());
  bool ipv6 = listen.host.find(':') != std::string::npos;
  std::cout << (ipv6 ? "[" + listen.host + "]" : listen.host) << ":" << (*server)->port()
            << std::endl;
  GPUPACK_LOG(kInfo, "webhook") << "serving AdmissionReviews on port " << (*server)->port()
                                << ", scheduler " << config.scheduler_name << ", failurePolicy "
                                << webhook::FailurePolicyName(config.failure_policy);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  GPUPACK_LOG(kInfo, "webhook") << "signal " << signal_number << ": stopping";
  (*server)->Stop();
  return 0;
}
