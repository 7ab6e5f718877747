// AdmissionReviews per second: the admission logic alone, and the whole webhook over TLS on
// loopback with keep-alive connections, as the API server calls it (target: >= 2,000/s).
// items_per_second is reviews/s; /threads:N is the number of concurrent client connections.
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <benchmark/benchmark.h>

#include "common/clock.h"
#include "server/http_server.h"
#include "server/test_certs.h"
#include "webhook/mutator.h"
#include "webhook/routes.h"

namespace gpupack::webhook {
namespace {

std::string CapturedReview() {
  std::ifstream in(std::string(GPUPACK_WEBHOOK_TESTDATA) + "/review_deployment_pod.json");
  GPUPACK_CHECK(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Served {
  std::string ca_file;
  int port = 0;
};
Served* served = nullptr;

// The three-container Deployment pod of webhook/testdata: validated and patched every time.
void BM_MutatorReview(benchmark::State& state) {
  Mutator mutator{Config{}};
  std::string review = CapturedReview();
  for (auto _ : state) {
    ReviewResult result = mutator.Review(review);
    GPUPACK_CHECK(result.outcome == Outcome::kPatched);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MutatorReview);

// One keep-alive TLS connection per benchmark thread, all against one server.
void BM_ReviewOverTlsKeepAlive(benchmark::State& state) {
  std::string review = CapturedReview();
  httplib::SSLClient client("127.0.0.1", served->port);
  client.set_ca_cert_path(served->ca_file.c_str());
  client.enable_server_certificate_verification(true);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // as Go's net/http, which the API server uses, does by default
  for (auto _ : state) {
    httplib::Result res = client.Post("/mutate", review, "application/json");
    if (!res || res->status != 200) {
      state.SkipWithError("review failed");
      break;
    }
  }
  client.stop();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReviewOverTlsKeepAlive)->Threads(1)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace gpupack::webhook

int main(int argc, char** argv) {
  using namespace gpupack::webhook;
  benchmark::Initialize(&argc, argv);
  std::string dir = (std::filesystem::temp_directory_path() / "gpupack-webhook-bench-XXXXXX").string();
  GPUPACK_CHECK(mkdtemp(dir.data()) != nullptr);
  gpupack::server::PemPair pair = gpupack::server::MakeSelfSignedCert("gpupack-webhook-bench");
  gpupack::server::WriteFileAtomically(dir + "/tls.crt", pair.cert_pem);
  gpupack::server::WriteFileAtomically(dir + "/tls.key", pair.key_pem);
  WebhookRoutes routes(Config{}, gpupack::BuildInfo{"bench", "bench"});
  gpupack::server::HttpServer http(
      WebhookServerOptions(Config{}, dir + "/tls.crt", dir + "/tls.key", gpupack::SystemClock::Instance()));
  routes.Register(http);
  GPUPACK_CHECK(http.Start("127.0.0.1:0").ok());
  Served s{dir + "/tls.crt", http.port()};
  served = &s;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  http.Drain();
  std::filesystem::remove_all(dir);
  return 0;
}
