#include "webhook/server.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/build_info_metric.h"
#include "common/log.h"
#include "webhook/cert_reloader.h"
#include "webhook/mutator.h"

namespace gpupack::webhook {
namespace {

// The API server caps objects at about 1.5 MiB and a review carries at most two of them.
constexpr size_t kMaxBodyBytes = 4 << 20;
// Requests one keep-alive connection may carry before the server closes it; high, because the
// API server reuses its connections and a new TLS handshake costs far more than a review.
constexpr size_t kKeepAliveMaxRequests = 100000;

class Metrics {
 public:
  explicit Metrics(const BuildInfo& build)
      : registry_(std::make_shared<prometheus::Registry>()),
        requests_(prometheus::BuildCounter()
                      .Name("gpupack_webhook_requests_total")
                      .Help("AdmissionReviews answered, by result")
                      .Register(*registry_)),
        duration_(prometheus::BuildHistogram()
                      .Name("gpupack_webhook_request_duration_seconds")
                      .Help("Time to answer one AdmissionReview")
                      .Register(*registry_)
                      .Add({}, prometheus::Histogram::BucketBoundaries{
                                   0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                   0.05, 0.1, 0.25, 0.5, 1})) {
    for (Outcome outcome :
         {Outcome::kPatched, Outcome::kSkipped, Outcome::kDenied, Outcome::kError}) {
      counters_[int(outcome)] = &requests_.Add({{"result", std::string(OutcomeName(outcome))}});
    }
    ExportBuildInfo(*registry_, build);
  }

  void Record(Outcome outcome, std::chrono::steady_clock::duration took) {
    counters_[int(outcome)]->Increment();
    duration_.Observe(std::chrono::duration<double>(took).count());
  }

  std::string Text() const { return prometheus::TextSerializer().Serialize(registry_->Collect()); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Histogram& duration_;
  prometheus::Counter* counters_[4] = {};
};

}  // namespace

struct Server::Impl {
  Impl(const Config& config, const BuildInfo& build, std::unique_ptr<CertReloader> certs)
      : mutator(config),
        metrics(build),
        certs(std::move(certs)),
        http([this](SSL_CTX& ctx) {
          SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
          SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION);
          this->certs->InstallOn(&ctx);
          return true;
        }) {}

  Mutator mutator;
  Metrics metrics;
  std::unique_ptr<CertReloader> certs;
  httplib::SSLServer http;
  int port = 0;
  std::atomic<bool> listener_done{false};
  std::thread thread;
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port; }

void Server::Stop() {
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ListenOptions& listen, const Config& config,
                                                const Clock& clock) {
  GPUPACK_ASSIGN_OR_RETURN(
      std::unique_ptr<CertReloader> certs,
      CertReloader::Create(listen.cert_file, listen.key_file, clock,
                           std::chrono::duration_cast<Clock::Duration>(config.cert_check_interval)));
  auto impl = std::make_unique<Impl>(config, listen.build, std::move(certs));
  if (!impl->http.is_valid()) return Status::Internal("cannot create the TLS server context");
  Impl& s = *impl;

  const size_t threads = size_t(config.worker_threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(kMaxBodyBytes);
  s.http.set_keep_alive_max_count(kKeepAliveMaxRequests);
  s.http.set_tcp_nodelay(true);

  s.http.Post("/mutate", [&s](const httplib::Request& req, httplib::Response& res) {
    auto start = std::chrono::steady_clock::now();
    ReviewResult result = s.mutator.Review(req.body);
    res.status = result.http_status;
    res.set_content(std::move(result.body), "application/json");
    s.metrics.Record(result.outcome, std::chrono::steady_clock::now() - start);
  });
  s.http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.metrics.Text(), "text/plain; version=0.0.4");
  });

  if (listen.port == 0) {
    s.port = s.http.bind_to_any_port(listen.host);
  } else {
    s.port = s.http.bind_to_port(listen.host, listen.port) ? listen.port : -1;
  }
  if (s.port < 0) {
    return Status::Unavailable("cannot listen on " + listen.host + ":" +
                               std::to_string(listen.port));
  }
  s.thread = std::thread([&s] {
    if (!s.http.listen_after_bind()) {
      GPUPACK_LOG(kError, "webhook") << "the HTTPS listener stopped unexpectedly";
    }
    s.listener_done = true;
  });
  // httplib's stop() is a no-op until the listener runs, so Stop() must not race ahead of it.
  while (!s.http.is_running() && !s.listener_done) std::this_thread::yield();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace gpupack::webhook
