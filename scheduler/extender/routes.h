// The extender's routes on the shared HTTP server (server/http_server.h; docs/extender.md "Endpoints"): POST
// {prefix}/filter|prioritize|bind|preempt answered by Extender, /readyz from Extender::Ready, and
// the extender's metrics (ExtenderMetrics and the backend's families) on /metrics.
//
// Thread safety: register before the server starts; the verbs are then served concurrently.
#pragma once

#include <string>

#include "scheduler/extender/config.h"
#include "scheduler/extender/extender.h"
#include "scheduler/extender/metrics.h"
#include "server/http_server.h"

namespace gpupack::extender {

// The server options of config: `threads` workers, the body limit, TLS when both files are set,
// and /readyz failing until the backend has synced. REQUIRES: `extender` outlives the server.
server::HttpServerOptions ExtenderServerOptions(const ExtenderConfig& config, const Extender& extender);

// The --metrics-listen server's options: those of ExtenderServerOptions, one worker, plain HTTP.
server::HttpServerOptions MetricsServerOptions(const ExtenderConfig& config, const Extender& extender);

// The Extender's options as configured (the verbs' knobs, the learner's refresh, the TTLs).
ExtenderOptions ExtenderOptionsOf(const ExtenderConfig& config);

// The four verbs under `prefix` ("" or "/path"). REQUIRES: `extender` outlives the server.
void RegisterVerbs(server::HttpServer& server, Extender& extender, const std::string& prefix);

// The extender's and its backend's metrics, gpupack_extender_ready refreshed on every scrape.
// REQUIRES: both outlive the server.
void RegisterMetrics(server::HttpServer& server, const Extender& extender, ExtenderMetrics& metrics);

}  // namespace gpupack::extender
