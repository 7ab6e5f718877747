#include "scheduler/extender/http_server.h"

#include <httplib.h>

#include "common/log.h"

namespace gpupack::extender {

Status ParseListenAddress(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(digits) > 65535) {
    return Status::InvalidArgument("listen address \"" + text + "\": expected HOST:PORT");
  }
  *host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = std::stoi(digits);
  return Status::Ok();
}

ExtenderServer::ExtenderServer(Extender& extender, ExtenderMetrics* metrics, ServerOptions options)
    : extender_(extender), metrics_(metrics), options_(std::move(options)) {}

ExtenderServer::~ExtenderServer() { Stop(); }

void ExtenderServer::Route() {
  httplib::Server& s = *server_;
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_tcp_nodelay(true);  // replies are single small writes; Nagle would add ~40 ms per request
  s.set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  s.set_read_timeout(options_.io_timeout);
  s.set_write_timeout(options_.io_timeout);
  // Idle kept-alive connections are dropped after 5 s: reconnecting on loopback is cheap, and a
  // SIGTERM's graceful stop waits for idle connections at most this long.
  s.set_keep_alive_timeout(5);
  s.set_keep_alive_max_count(10000);

  if (options_.serve_verbs) {
    auto verb = [this](Reply (Extender::*handler)(std::string_view)) {
      return [this, handler](const httplib::Request& req, httplib::Response& res) {
        Reply reply = (extender_.*handler)(req.body);
        res.status = reply.status;
        res.set_content(std::move(reply.body), reply.status == 200 ? "application/json" : "text/plain");
      };
    };
    s.Post(options_.prefix + "/filter", verb(&Extender::Filter));
    s.Post(options_.prefix + "/prioritize", verb(&Extender::Prioritize));
    s.Post(options_.prefix + "/bind", verb(&Extender::Bind));
    s.Post(options_.prefix + "/preempt", verb(&Extender::Preempt));
  }
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = extender_.Ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : "not synced with the cluster yet\n", "text/plain");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (metrics_ == nullptr) {
      res.status = 404;
      return;
    }
    metrics_->SetReady(extender_.Ready());
    res.set_content(metrics_->Render() + extender_.BackendMetricsText(), "text/plain; version=0.0.4");
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 413   ? "request body too large"
                       : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                                           : "request refused";
    res.set_content(what + "\n", "text/plain");
  });
}

StatusOr<std::string> ExtenderServer::Bind(const std::string& listen) {
  std::string host;
  int port = 0;
  GPUPACK_RETURN_IF_ERROR(ParseListenAddress(listen, &host, &port));
  if (!options_.tls_cert_file.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(options_.tls_cert_file.c_str(), options_.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return Status::InvalidArgument("cannot use TLS certificate " + options_.tls_cert_file + " and key " +
                                     options_.tls_key_file);
    }
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  Route();
  if (port == 0) {
    port = server_->bind_to_any_port(host);
    if (port < 0) return Status::Unavailable("cannot bind " + listen);
  } else if (!server_->bind_to_port(host, port)) {
    return Status::Unavailable("cannot bind " + listen + " (address in use or not local?)");
  }
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void ExtenderServer::Serve() {
  GPUPACK_CHECK(server_ != nullptr);
  server_->listen_after_bind();
}

void ExtenderServer::Stop() {
  if (server_ != nullptr) server_->stop();
}

}  // namespace gpupack::extender
