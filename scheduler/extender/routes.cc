#include "scheduler/extender/routes.h"

#include <prometheus/metric_family.h>

namespace gpupack::extender {

server::HttpServerOptions ExtenderServerOptions(const ExtenderConfig& config, const Extender& extender) {
  server::HttpServerOptions options;
  options.component = "extender";
  options.worker_threads = config.threads;
  options.waiting_threads = config.bind_threads;
  options.max_queue_wait = std::chrono::duration_cast<std::chrono::milliseconds>(config.max_queue_wait);
  options.max_body_bytes = config.max_body_bytes;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.readiness = [&extender] {
    return extender.Ready() ? extender.BackendProblem() : std::string("not synced with the cluster yet");
  };
  return options;
}

server::HttpServerOptions MetricsServerOptions(const ExtenderConfig& config, const Extender& extender) {
  server::HttpServerOptions options = ExtenderServerOptions(config, extender);
  options.worker_threads = 1;
  options.tls_cert_file.clear();
  options.tls_key_file.clear();
  return options;
}

ExtenderOptions ExtenderOptionsOf(const ExtenderConfig& config) {
  ExtenderOptions options;
  options.decisive_filter = config.decisive_filter;
  options.band_mib = config.filter_band_mib;
  options.decision = DecisionOptionsOf(config);
  options.neutral_non_gpu_pods = config.neutral_non_gpu_pods;
  options.request_ratio = config.request_ratio;
  options.max_devices_per_container = config.max_devices_per_container;
  options.remembered_pods = static_cast<size_t>(config.remembered_pods);
  options.remembered_ttl = config.remembered_ttl;
  options.reservation_ttl = config.reservation_ttl;
  options.filter_hold_ttl = config.filter_hold_ttl;
  options.defrag = config.defrag;
  return options;
}

void RegisterVerbs(server::HttpServer& server, Extender& extender, const std::string& prefix) {
  auto verb = [&extender](Reply (Extender::*handler)(std::string_view)) {
    return [&extender, handler](const server::Request& request) {
      Reply reply = (extender.*handler)(request.body);
      return server::Response{
          reply.status, reply.status == 200 ? "application/json" : "text/plain", std::move(reply.body), {}};
    };
  };
  server.Handle("POST", prefix + "/filter", verb(&Extender::Filter));
  server.Handle("POST", prefix + "/prioritize", verb(&Extender::Prioritize));
  // A bind waits on the API server (fence, fresh read, Binding): on its own pool, so that binds in
  // flight never hold the workers the next pods' filters need.
  server.Handle("POST", prefix + "/bind", verb(&Extender::Bind), server::RunOn::kWaiting);
  server.Handle("POST", prefix + "/preempt", verb(&Extender::Preempt));
}

void RegisterMetrics(server::HttpServer& server, const Extender& extender, ExtenderMetrics& metrics) {
  server.AddMetrics([&extender, &metrics] {
    metrics.SetReady(extender.Ready());
    std::vector<prometheus::MetricFamily> families = metrics.Collect();
    std::vector<prometheus::MetricFamily> backend = extender.BackendMetrics();
    families.insert(families.end(), std::make_move_iterator(backend.begin()), std::make_move_iterator(backend.end()));
    return families;
  });
}

}  // namespace gpupack::extender
