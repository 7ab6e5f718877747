// AdmissionReviews per second: the admission logic alone, and the whole webhook over TLS on
// loopback with keep-alive connections, as the API server calls it (target: >= 10,000/s with 8
// connections). items_per_second is reviews/s; /threads:N is the number of concurrent client
// connections.
//
// Client and server share the machine's cores, so the TLS cases also say where the CPU went:
//   server_us / client_us  CPU time per review of the server's threads / of the client threads
//                          (server_us is what one review costs the webhook; 1e6 / server_us is
//                          the reviews/s one core could serve with no client beside it)
//   p50_us / p99_us        round trip of one review, per connection (averaged over connections)
// BM_ReviewOverTlsKeepAlive is the lean client: the request is written with one SSL_write and the reply
// read into one buffer, as lean as the API server's Go client. BM_ReviewOverTlsKeepAliveHttplib is the
// same through cpp-httplib's client, which costs more CPU per review than the server does.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <benchmark/benchmark.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/clock.h"
#include "server/http_server.h"
#include "server/test_certs.h"
#include "testing/loopback.h"
#include "webhook/mutator.h"
#include "webhook/routes.h"

namespace gpupack::webhook {
namespace {

// Client threads take this name, so the server's threads are the process's other threads.
constexpr char kClientThreadName[] = "bench-client";

// The captured Deployment pod's review, less the lines of the two GPU env entries its server
// container sets itself, which the default config refuses: every review is validated and patched
// (BM_MutatorReview checks it).
std::string CapturedReview() {
  std::ifstream in(std::string(GPUPACK_WEBHOOK_TESTDATA) + "/review_deployment_pod.json");
  GPUPACK_CHECK(in.good());
  std::string review;
  for (std::string line; std::getline(in, line);) {
    if (line.find("{\"name\": \"NVIDIA_") == std::string::npos) review += line + "\n";
  }
  return review;
}

struct Served {
  std::string ca_file;
  int port = 0;
};
Served* served = nullptr;

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// CPU seconds (user + system) of every thread of this process not named kClientThreadName.
double ServerCpuSeconds() {
  const double ticks = double(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (line.substr(open + 1, close - open - 1) == kClientThreadName) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt: fields 3-13
    double user = 0, system = 0;
    fields >> user >> system;
    total += (user + system) / ticks;
  }
  return total;
}

// A keep-alive TLS 1.3 connection that verifies the server against the CA file and 127.0.0.1,
// writes a ready-made request with one SSL_write and reads the reply by its Content-Length.
class LeanTlsClient {
 public:
  LeanTlsClient(int port, const std::string& ca_file) : ctx_(SSL_CTX_new(TLS_client_method())) {
    GPUPACK_CHECK(SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) == 1);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    fd_ = ConnectLoopback(port);
    GPUPACK_CHECK(fd_ >= 0);
    ssl_ = SSL_new(ctx_);
    GPUPACK_CHECK(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), "127.0.0.1") == 1);
    SSL_set_fd(ssl_, fd_);
    GPUPACK_CHECK(SSL_connect(ssl_) == 1);
  }
  ~LeanTlsClient() {
    SSL_free(ssl_);
    close(fd_);
    SSL_CTX_free(ctx_);
  }
  LeanTlsClient(const LeanTlsClient&) = delete;
  LeanTlsClient& operator=(const LeanTlsClient&) = delete;

  // Sends `request` (a whole HTTP/1.1 request) and returns the reply's status code; 0 when the
  // connection failed or the reply is not a delimited HTTP/1.1 response.
  int RoundTrip(const std::string& request) {
    if (SSL_write(ssl_, request.data(), int(request.size())) != int(request.size())) return 0;
    reply_.clear();
    size_t length = std::string::npos;  // of the whole reply, once its headers are in
    while (length == std::string::npos || reply_.size() < length) {
      char chunk[16384];
      const int n = SSL_read(ssl_, chunk, sizeof(chunk));
      if (n <= 0) return 0;
      reply_.append(chunk, size_t(n));
      if (length != std::string::npos) continue;
      const size_t header_end = reply_.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      const size_t field = reply_.find("Content-Length: ");
      if (field == std::string::npos || field > header_end) return 0;
      length = header_end + 4 + std::stoul(reply_.substr(field + 16, header_end - field - 16));
    }
    if (reply_.size() != length || reply_.compare(0, 9, "HTTP/1.1 ") != 0) return 0;
    return std::stoi(reply_.substr(9, 3));
  }

 private:
  SSL_CTX* ctx_;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  std::string reply_;
};

// Runs `review_once` (true: a 200) for every iteration on this thread's connection and reports
// reviews/s, CPU per review and the round trip's percentiles.
template <class ReviewOnce>
void MeasureReviews(benchmark::State& state, ReviewOnce review_once) {
  pthread_setname_np(pthread_self(), kClientThreadName);
  std::vector<double> micros;
  micros.reserve(1 << 16);
  const double client_start = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
  double server_start = -1;
  for (auto _ : state) {
    // Thread 0's first iteration: past the start barrier, so every client thread has its name.
    if (server_start < 0 && state.thread_index() == 0) server_start = ServerCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    if (!review_once()) {
      state.SkipWithError("review failed");
      break;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  const double server_cpu = state.thread_index() == 0 ? ServerCpuSeconds() - server_start : 0;
  const double client_cpu = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - client_start;
  state.SetItemsProcessed(state.iterations());
  // Summed over threads, then divided by every thread's iterations together.
  state.counters["server_us"] = benchmark::Counter(server_cpu * 1e6, benchmark::Counter::kAvgIterations);
  state.counters["client_us"] = benchmark::Counter(client_cpu * 1e6, benchmark::Counter::kAvgIterations);
  if (micros.empty()) return;
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) { return micros[std::min(micros.size() - 1, size_t(q * double(micros.size())))]; };
  state.counters["p50_us"] = benchmark::Counter(at(0.50), benchmark::Counter::kAvgThreads);
  state.counters["p99_us"] = benchmark::Counter(at(0.99), benchmark::Counter::kAvgThreads);
}

// The three-container Deployment pod of webhook/testdata: reviewed and patched every time.
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
  const std::string review = CapturedReview();
  const std::string request = "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(served->port) +
                              "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(review.size()) +
                              "\r\n\r\n" + review;
  LeanTlsClient client(served->port, served->ca_file);
  MeasureReviews(state, [&] { return client.RoundTrip(request) == 200; });
}
BENCHMARK(BM_ReviewOverTlsKeepAlive)->Threads(1)->Threads(8)->UseRealTime();

void BM_ReviewOverTlsKeepAliveHttplib(benchmark::State& state) {
  const std::string review = CapturedReview();
  httplib::SSLClient client("127.0.0.1", served->port);
  client.set_ca_cert_path(served->ca_file.c_str());
  client.enable_server_certificate_verification(true);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // as Go's net/http, which the API server uses, does by default
  MeasureReviews(state, [&] {
    httplib::Result res = client.Post("/mutate", review, "application/json");
    return res && res->status == 200;
  });
  client.stop();
}
BENCHMARK(BM_ReviewOverTlsKeepAliveHttplib)->Threads(1)->Threads(8)->UseRealTime();

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
