// The HTTPS front of gpupack-webhook: POST /mutate (AdmissionReview v1, answered by Mutator),
// GET /healthz, GET /metrics (Prometheus text). TLS identity from CertReloader, so a rotated
// certificate is served without a restart. Keep-alive connections are kept open for many
// requests, as the API server reuses them.
//
// Thread safety: Start/Stop/port may be called from any thread; requests are served on a pool of
// config.worker_threads threads.
#pragma once

#include <memory>
#include <string>

#include "common/build_info.h"
#include "common/clock.h"
#include "common/status.h"
#include "webhook/config.h"

namespace gpupack::webhook {

struct ListenOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port; port() tells which
  std::string cert_file;
  std::string key_file;
  BuildInfo build;  // exported on /metrics as gpupack_build_info{version,revision} 1
};

class Server {
 public:
  // Loads the certificate, binds, and starts serving on a background thread. InvalidArgument or
  // NotFound for a bad certificate or key, Unavailable when the address cannot be bound.
  // `clock` paces certificate checks; REQUIRES: it outlives the server.
  static StatusOr<std::unique_ptr<Server>> Start(const ListenOptions& listen, const Config& config,
                                                 const Clock& clock);
  ~Server();  // Stops.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Stops accepting, lets requests in flight finish, joins the serving thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupack::webhook
