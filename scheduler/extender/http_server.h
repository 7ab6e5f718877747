// The extender's HTTP surface (docs/extender.md "Endpoints"): POST {prefix}/filter|prioritize|bind|preempt and
// GET /healthz, /readyz, /metrics, on cpp-httplib with a fixed thread pool, a request body limit
// (413 beyond it), keep-alive, read/write timeouts against slow clients, and optional TLS.
// The only extender file that includes httplib.h.
//
// Usage: construct, Bind (port 0 picks a free one), then Serve on some thread; Stop from any
// thread makes Serve return after in-flight requests finish.
//
// Thread safety: Stop may be called from any thread; the rest from one.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/metrics.h"

namespace httplib {
class Server;
}

namespace gpupack::extender {

struct ServerOptions {
  bool serve_verbs = true;  // false: only /healthz, /readyz, /metrics (a metrics-only listener)
  std::string prefix;       // "" or "/path"
  int64_t max_body_bytes = 64ll << 20;
  int threads = 4;
  std::chrono::seconds io_timeout{10};  // per read/write: a slow client cannot hold a thread longer
  std::string tls_cert_file;  // both set: HTTPS
  std::string tls_key_file;
};

class ExtenderServer {
 public:
  // `extender` and `metrics` (may be null) must outlive the server.
  ExtenderServer(Extender& extender, ExtenderMetrics* metrics, ServerOptions options);
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  // Binds "HOST:PORT" ("[::1]:PORT" for IPv6; port 0 = any free port). Returns the bound
  // "HOST:PORT". InvalidArgument for a malformed address or unusable TLS files, Unavailable when
  // the address cannot be bound.
  StatusOr<std::string> Bind(const std::string& listen);
  // Serves until Stop. REQUIRES: Bind succeeded.
  void Serve();
  void Stop();

 private:
  void Route();

  Extender& extender_;
  ExtenderMetrics* metrics_;
  const ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

// Splits "HOST:PORT" / "[IPv6]:PORT" / ":PORT" (all IPv4 interfaces).
Status ParseListenAddress(const std::string& text, std::string* host, int* port);

}  // namespace gpupack::extender
