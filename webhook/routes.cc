#include "webhook/routes.h"

#include <chrono>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/build_info_metric.h"
#include "webhook/mutator.h"

namespace gpupack::webhook {

server::HttpServerOptions WebhookServerOptions(const Config& config, std::string cert_file, std::string key_file,
                                               const Clock& clock) {
  server::HttpServerOptions options;
  options.component = "webhook";
  // Reviews run on the I/O threads (below), so workerThreads sizes those; the worker pool only
  // serves /metrics.
  options.io_threads = config.worker_threads;
  options.worker_threads = 1;
  options.max_body_bytes = 4 << 20;
  options.tls_cert_file = std::move(cert_file);
  options.tls_key_file = std::move(key_file);
  options.cert_check_interval = config.cert_check_interval;
  options.clock = &clock;
  return options;
}

struct WebhookRoutes::Impl {
  Impl(const Config& config, const BuildInfo& build)
      : mutator(config),
        requests(prometheus::BuildCounter()
                     .Name("gpupack_webhook_requests_total")
                     .Help("AdmissionReviews answered, by result")
                     .Register(registry)),
        duration(prometheus::BuildHistogram()
                     .Name("gpupack_webhook_request_duration_seconds")
                     .Help("Time to answer one AdmissionReview")
                     .Register(registry)
                     .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                                      0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1})) {
    for (Outcome outcome : {Outcome::kPatched, Outcome::kSkipped, Outcome::kDenied, Outcome::kError}) {
      counters[int(outcome)] = &requests.Add({{"result", std::string(OutcomeName(outcome))}});
    }
    ExportBuildInfo(registry, build);
  }

  server::Response Mutate(const server::Request& request) {
    const auto start = std::chrono::steady_clock::now();
    ReviewResult result = mutator.Review(request.body);
    counters[int(result.outcome)]->Increment();
    duration.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return server::Response{result.http_status, "application/json", std::move(result.body), {}};
  }

  Mutator mutator;
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Histogram& duration;
  prometheus::Counter* counters[4] = {};
};

WebhookRoutes::WebhookRoutes(const Config& config, const BuildInfo& build)
    : impl_(std::make_unique<Impl>(config, build)) {}

WebhookRoutes::~WebhookRoutes() = default;

void WebhookRoutes::Register(server::HttpServer& server) {
  Impl& impl = *impl_;
  // A review is pure computation of some 50-100 µs: it runs on the I/O thread, saving the two
  // thread hand-offs that cost about a quarter of the throughput with 8 TLS clients.
  server.Handle(
      "POST", "/mutate", [&impl](const server::Request& request) { return impl.Mutate(request); },
      server::RunOn::kIoThread);
  server.AddMetrics(impl.registry);
}

}  // namespace gpupack::webhook
