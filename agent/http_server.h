// The agent's HTTP endpoints: GET /metrics (Prometheus text) and GET /healthz (200 "ok" while
// the agent loop is alive, 503 with the reason when it is not).
//
// Thread safety: Start/Stop from one thread; handlers run on the server's threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "agent/metrics.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace gpupack::agent {

class HttpServer {
 public:
  // Binds host:port (port 0 = any free port) and serves on a background thread. `unhealthy`
  // returns "" when healthy, else the reason. Unavailable naming the address when it cannot bind.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port, AgentMetrics* metrics,
                                                     std::function<std::string()> unhealthy);
  ~HttpServer();  // Stops.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gpupack::agent
