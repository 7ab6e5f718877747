// The one HTTP/1.1 server of gpupack-extender, gpupack-webhook and gpupack-agent, on Boost.Asio
// with Boost.Beast's parser. Each binary registers its routes, (method, path) -> handler; the
// server owns everything else:
//
//   * Connections cost a socket, not a thread: `io_threads` I/O threads accept, read, parse, do
//     TLS and write for every connection asynchronously (each connection stays on one I/O thread,
//     given round robin, so its completions are never handed between threads);
//     handlers run on a separate pool of `worker_threads`, so a slow handler never stalls
//     another connection's I/O or the built-in probes, and handlers that wait on another service
//     (a bind waiting on the API server) on a pool of `waiting_threads` (RunOn::kWaiting).
//   * Keep-alive, with an idle timeout. A request's headers must arrive within `header_timeout`
//     of its first byte and its body within `body_timeout` of the headers (slowloris); a reply
//     must be taken within `write_timeout`. A timed-out connection is closed.
//   * Bodies above `max_body_bytes` get 413 naming the limit. Bodies are handed over as bytes,
//     whatever their Content-Type (curl's default application/x-www-form-urlencoded included).
//   * A known path with the wrong method gets 405 and an Allow header; an unknown path 404.
//   * Overload: a request that has waited for a worker longer than `max_queue_wait` is answered
//     503 with Retry-After, without running its handler, and counted (gpupack_http_shed_total):
//     its caller (kube-scheduler, whose extender httpTimeout bounds how long it listens) gets a
//     fast, clear error instead of an answer after it stopped waiting, and the queue drains at
//     the workers' speed. Routes on the waiting pool are never shed (a bind queued behind others
//     is still worth doing); the probes answer on the I/O threads.
//   * A handler (or probe, or metrics source) that throws gets its request answered 500 with the
//     exception's what(), logged and counted (gpupack_http_handler_exceptions_total); the
//     connection and the process carry on.
//   * Built in: GET /healthz (the health callback), GET /readyz (the readiness callback) and
//     GET /metrics (every registered metrics source, serialised by prometheus::TextSerializer).
//   * TLS when a certificate and key are given, served through CertReloader: a rotated pair is
//     picked up by new handshakes without a restart. A TLS connection keeps OpenSSL's record
//     buffers (about 34 KB) while idle rather than reallocating them around every record.
//   * Drain: stop accepting, let requests in flight finish (their replies say Connection: close),
//     close idle connections; whatever is still open after `drain_timeout` is cut.
//
// Usage: construct, Handle/AddMetrics, Start (port 0 picks a free port; the bound address is
// returned), later Drain. The destructor drains.
//
// Thread safety: Handle and AddMetrics before Start only. Drain may be called from any thread
// (not from a handler). Handlers and callbacks run concurrently on the worker threads.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace prometheus {
class Collectable;
struct MetricFamily;
}  // namespace prometheus

namespace gpupack::server {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string query;   // after '?', "" when none
  std::string content_type;
  std::string body;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

using Handler = std::function<Response(const Request&)>;

// Where a handler runs. kWorker by default: the worker pool (about one thread per core), so a
// handler that takes long never delays another connection. kWaiting: a pool of its own for
// handlers that spend their time waiting on another service (a bind writing to the API server),
// so that while many of them wait they hold no worker that a CPU-bound handler (a filter) needs.
// kIoThread runs it on the connection's I/O thread, saving two thread hand-offs per request;
// only for handlers that never block and finish in well under a millisecond (an admission review).
enum class RunOn { kWorker, kWaiting, kIoThread };
// Returns "" when all is well, else the reason (sent with 503).
using Probe = std::function<std::string()>;

struct HttpServerOptions {
  std::string component = "http";  // names the server in logs
  int worker_threads = 0;          // threads that run handlers; 0: one per core
  int waiting_threads = 32;        // threads that run RunOn::kWaiting handlers (started only if any)
  int io_threads = 0;              // threads that run the connections' I/O; 0: one per core
  int64_t max_body_bytes = 64ll << 20;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};   // between requests
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};  // first byte to end of headers
  std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};    // end of headers to end of body
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};   // one reply
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(20)};   // Drain waits this long at most
  // Longest wait in the worker pool's queue before a request is shed (above); 0: no bound. The
  // wait is measured on `clock` (below), wall time: a clock step forward past the bound sheds the
  // requests queued across it, once.
  std::chrono::milliseconds max_queue_wait{0};
  // Both set: HTTPS (TLS 1.2+). The files are looked at again at most once per
  // `cert_check_interval`, on a handshake, by `clock` (SystemClock when null; must outlive). The
  // same clock times the queue waits.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::chrono::seconds cert_check_interval{10};
  const Clock* clock = nullptr;
  Probe health;     // GET /healthz; null: always "ok"
  Probe readiness;  // GET /readyz; null: always "ok"
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Drains.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `method` on exactly `path`. REQUIRES: before Start; not a built-in path.
  void Handle(std::string method, std::string path, Handler handler, RunOn run_on = RunOn::kWorker);
  // Adds a source of metric families to GET /metrics. REQUIRES: before Start.
  void AddMetrics(std::function<std::vector<prometheus::MetricFamily>()> collect);
  // `collectable` (e.g. a prometheus::Registry) must outlive the server.
  void AddMetrics(const prometheus::Collectable& collectable);

  // Binds "HOST:PORT" ("[::1]:PORT", ":PORT" = all IPv4 interfaces; port 0 = any free port) and
  // serves. Returns the bound "HOST:PORT". InvalidArgument for a malformed address, NotFound /
  // InvalidArgument for unusable TLS files, Unavailable when the address cannot be bound.
  StatusOr<std::string> Start(const std::string& listen);
  // The bound port; 0 before Start.
  int port() const;
  // Requests waiting for a worker now (also the gauge gpupack_http_requests_queued).
  int64_t queued() const;
  // Stops accepting, finishes requests in flight, closes idle connections, then stops the
  // threads. Idempotent.
  void Drain();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "HOST:PORT" / "[IPv6]:PORT" / ":PORT" (all IPv4 interfaces).
Status ParseListenAddress(const std::string& text, std::string* host, int* port);

}  // namespace gpupack::server
