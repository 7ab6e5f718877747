#include "agent/http_server.h"

#include <httplib.h>

#include <chrono>

namespace gpupack::agent {

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port, AgentMetrics* metrics,
                                                        std::function<std::string()> unhealthy) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Serialize(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->server_->Get("/healthz", [unhealthy](const httplib::Request&, httplib::Response& res) {
    const std::string reason = unhealthy ? unhealthy() : "";
    res.status = reason.empty() ? 200 : 503;
    res.set_content(reason.empty() ? "ok\n" : reason + "\n", "text/plain");
  });
  const int bound = port == 0 ? s->server_->bind_to_any_port(host) : (s->server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port));
  s->port_ = bound;
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  // stop() is a no-op until the accept loop runs, so a Stop right after Start would hang the
  // join: wait for it to run.
  for (int waited_ms = 0; !server->is_running() && waited_ms < 5000; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpupack::agent
