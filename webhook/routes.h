// gpupack-webhook's routes on the shared HTTP server (server/http_server.h): POST /mutate
// (AdmissionReview v1, answered by Mutator), and the webhook's metrics on the server's /metrics
// (gpupack_webhook_requests_total{result}, gpupack_webhook_request_duration_seconds,
// gpupack_build_info). The server is HTTPS only: WebhookServerOptions names the certificate.
//
// Thread safety: Register once before the server starts; /mutate is then served concurrently.
#pragma once

#include <memory>
#include <string>

#include "common/build_info.h"
#include "common/clock.h"
#include "server/http_server.h"
#include "webhook/config.h"

namespace gpupack::webhook {

// The server the webhook serves on: HTTPS with the certificate and key (re-read when they change,
// at most once per config.cert_check_interval by `clock`), config.worker_threads workers, and a
// 4 MiB body limit (the API server caps objects at about 1.5 MiB and a review carries at most
// two). REQUIRES: `clock` outlives the server.
server::HttpServerOptions WebhookServerOptions(const Config& config, std::string cert_file, std::string key_file,
                                               const Clock& clock);

class WebhookRoutes {
 public:
  WebhookRoutes(const Config& config, const BuildInfo& build);
  ~WebhookRoutes();
  WebhookRoutes(const WebhookRoutes&) = delete;
  WebhookRoutes& operator=(const WebhookRoutes&) = delete;

  // REQUIRES: before server.Start; *this outlives the server.
  void Register(server::HttpServer& server);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupack::webhook
